#include "core/sampling/stages.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ember {

namespace {
bool by_logit_desc(const TokenLogit& a, const TokenLogit& b) {
  // Ties broken by id so that the order (and thus every draw) is the same on every platform.
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}
}  // namespace

void sort_candidates(CandidateSet& c) {
  if (c.sorted) return;
  std::sort(c.data, c.data + c.size, by_logit_desc);
  c.sorted = true;
}

void LogitBiasStage::apply(CandidateSet& c) {
  for (const auto& [id, bias] : bias_) {
    if (id < 0 || static_cast<size_t>(id) >= c.size || c.data[id].id != id)
      throw std::logic_error("LogitBiasStage: candidate set is not the full vocabulary in id order");
    c.data[id].logit += bias;
  }
}

PenaltyStage::PenaltyStage(float repeat, float frequency, float presence, int32_t last_n, int32_t n_vocab)
    : repeat_(repeat), frequency_(frequency), presence_(presence),
      ring_(static_cast<size_t>(last_n)), counts_(static_cast<size_t>(n_vocab), 0) {}

void PenaltyStage::accept(int32_t token) {
  if (ring_.empty()) return;
  if (ring_filled_ == ring_.size()) {
    --counts_[static_cast<size_t>(ring_[ring_next_])];
  } else {
    ++ring_filled_;
  }
  ring_[ring_next_] = token;
  ++counts_[static_cast<size_t>(token)];
  ring_next_ = (ring_next_ + 1) % ring_.size();
}

void PenaltyStage::reset() {
  std::fill(counts_.begin(), counts_.end(), 0);
  ring_next_ = 0;
  ring_filled_ = 0;
}

void PenaltyStage::apply(CandidateSet& c) {
  if (ring_filled_ == 0) return;
  for (size_t i = 0; i < c.size; ++i) {
    const int32_t count = counts_[static_cast<size_t>(c.data[i].id)];
    if (count == 0) continue;
    float& logit = c.data[i].logit;
    // Dividing a negative logit would raise its probability, hence the asymmetric rule.
    logit = logit > 0.0f ? logit / repeat_ : logit * repeat_;
    logit -= static_cast<float>(count) * frequency_ + presence_;
  }
  c.sorted = false;
}

void TopKStage::apply(CandidateSet& c) {
  if (k_ <= 0) return;
  const size_t k = std::min(c.size, static_cast<size_t>(k_));
  if (!c.sorted) std::partial_sort(c.data, c.data + k, c.data + c.size, by_logit_desc);
  c.size = k;
  c.sorted = true;
}

void TopPStage::apply(CandidateSet& c) {
  if (p_ >= 1.0f || c.size <= 1) return;
  sort_candidates(c);
  const float max_logit = c.data[0].logit;
  double sum = 0.0;
  for (size_t i = 0; i < c.size; ++i) sum += std::exp(static_cast<double>(c.data[i].logit - max_logit));
  if (!(sum > 0.0) || !std::isfinite(sum)) return;
  double cumulative = 0.0;
  for (size_t i = 0; i < c.size; ++i) {
    cumulative += std::exp(static_cast<double>(c.data[i].logit - max_logit)) / sum;
    if (cumulative >= p_) {
      c.size = i + 1;
      return;
    }
  }
}

void MinPStage::apply(CandidateSet& c) {
  if (p_ <= 0.0f || c.size <= 1) return;
  float max_logit = c.data[0].logit;
  if (!c.sorted)
    for (size_t i = 1; i < c.size; ++i) max_logit = std::max(max_logit, c.data[i].logit);
  if (!std::isfinite(max_logit)) return;
  // p_i >= p * p_max  <=>  logit_i >= max_logit + log(p): no softmax needed.
  const float threshold = max_logit + std::log(p_);
  if (c.sorted) {
    size_t keep = 1;
    while (keep < c.size && c.data[keep].logit >= threshold) ++keep;
    c.size = keep;
  } else {
    TokenLogit* end = std::partition(c.data, c.data + c.size,
                                     [threshold](const TokenLogit& t) { return t.logit >= threshold; });
    c.size = std::max<size_t>(1, static_cast<size_t>(end - c.data));
  }
}

void TemperatureStage::apply(CandidateSet& c) {
  for (size_t i = 0; i < c.size; ++i) c.data[i].logit /= t_;
}

}  // namespace ember
