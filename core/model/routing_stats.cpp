#include "core/model/routing_stats.h"

#include <algorithm>
#include <stdexcept>

namespace ember {

namespace {

// The chosen expert's share of all slots, relative to the uniform share.
template <class Pick>
double relative_load(const std::vector<uint64_t>& slots, Pick pick) {
  uint64_t total = 0;
  for (uint64_t s : slots) total += s;
  if (total == 0) return 0.0;
  return static_cast<double>(*pick(slots.begin(), slots.end())) * static_cast<double>(slots.size()) /
         static_cast<double>(total);
}

}  // namespace

double LayerRoutingStats::max_load() const {
  return relative_load(expert_slots, [](auto a, auto b) { return std::max_element(a, b); });
}

double LayerRoutingStats::min_load() const {
  return relative_load(expert_slots, [](auto a, auto b) { return std::min_element(a, b); });
}

RoutingStats::RoutingStats(int64_t n_layer, int64_t n_expert, int64_t k)
    : n_expert_(n_expert), k_(k), layers_(static_cast<size_t>(n_layer)),
      previous_(static_cast<size_t>(n_layer * k), -1) {
  if (n_expert <= 0 || k <= 0 || k > n_expert) throw std::invalid_argument("routing stats: need 1 <= k <= n_expert");
  for (LayerRoutingStats& l : layers_) l.expert_slots.assign(static_cast<size_t>(n_expert), 0);
}

void RoutingStats::on_routed(int64_t layer, int64_t n, int64_t k, const int32_t* chosen, const float*) {
  if (k != k_ || layer < 0 || layer >= static_cast<int64_t>(layers_.size())) {
    throw std::invalid_argument("routing stats: routing of another model");
  }
  LayerRoutingStats& s = layers_[static_cast<size_t>(layer)];
  int32_t* prev = &previous_[static_cast<size_t>(layer * k)];
  for (int64_t t = 0; t < n; ++t) {
    const int32_t* now = chosen + t * k;
    for (int64_t j = 0; j < k; ++j) ++s.expert_slots[static_cast<size_t>(now[j])];
    ++s.tokens;
    if (prev[0] >= 0) {
      ++s.pairs;
      if (now[0] == prev[0]) ++s.top1_repeats;
      bool shared = false;
      for (int64_t i = 0; i < k && !shared; ++i) shared = std::find(prev, prev + k, now[i]) != prev + k;
      if (shared) ++s.overlaps;
    }
    std::copy(now, now + k, prev);
  }
}

void RoutingStats::sequence_break() { std::fill(previous_.begin(), previous_.end(), -1); }

double RoutingStats::chance_top1_repeat() const { return 1.0 / static_cast<double>(n_expert_); }

double RoutingStats::chance_overlap() const {
  // P(two independent uniform k-sets are disjoint) = C(n - k, k) / C(n, k) = prod_{i<k} (n-k-i)/(n-i).
  double disjoint = 1.0;
  for (int64_t i = 0; i < k_; ++i) {
    disjoint *= std::max<double>(0.0, static_cast<double>(n_expert_ - k_ - i)) / static_cast<double>(n_expert_ - i);
  }
  return 1.0 - disjoint;
}

}  // namespace ember
