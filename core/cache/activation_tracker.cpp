#include "core/cache/activation_tracker.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace ember::cache {

namespace {

// g is divided out once it passes this: far from overflow (stored values are at most ~1.44 x
// half_life x g), and rare enough that the O(n_ff) pass costs nothing per token.
constexpr double kRenormalizeAbove = 18446744073709551616.0;  // 2^64
// restore() accepts counts this far above the token weight (rounding of count/g vs tokens/g).
constexpr double kCountSlack = 1e-6;

void check_half_life(double h) {
  // NaN fails both comparisons; +inf is allowed (no decay: the per-token factor is 2^0 = 1).
  if (!(h >= 1.0)) {
    throw std::invalid_argument("activation tracker: half-life must be at least 1 token (got " + std::to_string(h) + ")");
  }
}

}  // namespace

ActivationTracker::ActivationTracker(std::span<const uint32_t> n_ff, double half_life_tokens) {
  if (n_ff.empty()) throw std::invalid_argument("activation tracker: no layers");
  check_half_life(half_life_tokens);
  uint64_t total = 0;
  layers_.reserve(n_ff.size());
  for (size_t l = 0; l < n_ff.size(); ++l) {
    if (n_ff[l] == 0 || n_ff[l] > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
      throw std::invalid_argument("activation tracker: layer " + std::to_string(l) + " has n_ff " + std::to_string(n_ff[l]) +
                                  " (must be 1 .. INT32_MAX)");
    }
    layers_.push_back(Layer{n_ff[l], total, 1.0, 0.0});
    total += n_ff[l];  // at most 2^31 per layer: overflows only past 2^32 layers, which a span cannot hold here
  }
  counts_.assign(total, 0.0);
  set_half_life(half_life_tokens);
}

void ActivationTracker::set_half_life(double half_life_tokens) {
  check_half_life(half_life_tokens);
  half_life_ = half_life_tokens;
  step_ = std::exp2(1.0 / half_life_tokens);
}

ActivationTracker::Layer& ActivationTracker::layer_at(size_t layer, const char* op) {
  return const_cast<Layer&>(static_cast<const ActivationTracker*>(this)->layer_at(layer, op));
}

const ActivationTracker::Layer& ActivationTracker::layer_at(size_t layer, const char* op) const {
  if (layer >= layers_.size()) {
    throw std::out_of_range(std::string("activation tracker: ") + op + ": layer " + std::to_string(layer) + " of " +
                            std::to_string(layers_.size()));
  }
  return layers_[layer];
}

void ActivationTracker::renormalize(Layer& l) {
  double* c = counts_.data() + l.offset;
  for (uint32_t b = 0; b < l.n_ff; ++b) {
    c[b] /= l.growth;
    // A bundle silent for thousands of half-lives would drift into denormals, which are slow to
    // multiply on x86; its weight is nothing by then.
    if (c[b] < DBL_MIN) c[b] = 0.0;
  }
  l.stored_tokens /= l.growth;
  l.growth = 1.0;
}

void ActivationTracker::record(uint32_t layer, std::span<const int32_t> active) {
  Layer& l = layer_at(layer, "record");
  // Checked first so that a bad list leaves the statistics untouched.
  for (int32_t b : active) {
    if (b < 0 || static_cast<uint32_t>(b) >= l.n_ff) {
      throw std::out_of_range("activation tracker: record: bundle " + std::to_string(b) + " of layer " +
                              std::to_string(layer) + " outside 0 .. " + std::to_string(l.n_ff - 1));
    }
  }
  if (l.growth > kRenormalizeAbove) renormalize(l);
  l.growth *= step_;  // every earlier token is now worth d times less relative to this one
  l.stored_tokens += l.growth;
  double* c = counts_.data() + l.offset;
  for (int32_t b : active) c[b] += l.growth;
}

double ActivationTracker::tokens(size_t layer) const {
  const Layer& l = layer_at(layer, "tokens");
  return l.stored_tokens / l.growth;
}

double ActivationTracker::count(size_t layer, uint32_t bundle) const {
  const Layer& l = layer_at(layer, "count");
  if (bundle >= l.n_ff) throw std::out_of_range("activation tracker: count: bundle " + std::to_string(bundle) + " outside the layer");
  return std::min(counts_[l.offset + bundle], l.stored_tokens) / l.growth;
}

void ActivationTracker::frequency(size_t layer, std::span<float> out) const {
  const Layer& l = layer_at(layer, "frequency");
  if (out.size() != l.n_ff) {
    throw std::invalid_argument("activation tracker: frequency: output has " + std::to_string(out.size()) + " values, layer " +
                                std::to_string(layer) + " has " + std::to_string(l.n_ff) + " bundles");
  }
  if (!(l.stored_tokens > 0.0)) {
    std::fill(out.begin(), out.end(), 0.0f);
    return;
  }
  const double* c = counts_.data() + l.offset;
  for (uint32_t b = 0; b < l.n_ff; ++b) out[b] = static_cast<float>(std::min(1.0, c[b] / l.stored_tokens));
}

void ActivationTracker::seed(size_t layer, std::span<const float> freq, double weight_tokens) {
  Layer& l = layer_at(layer, "seed");
  if (freq.size() != l.n_ff) {
    throw std::invalid_argument("activation tracker: seed: " + std::to_string(freq.size()) + " frequencies for layer " +
                                std::to_string(layer) + " of " + std::to_string(l.n_ff) + " bundles");
  }
  if (!std::isfinite(weight_tokens) || weight_tokens < 0.0) {
    throw std::invalid_argument("activation tracker: seed: weight " + std::to_string(weight_tokens) + " tokens (must be finite, >= 0)");
  }
  for (uint32_t b = 0; b < l.n_ff; ++b) {
    if (!(freq[b] >= 0.0f && freq[b] <= 1.0f)) {
      throw std::invalid_argument("activation tracker: seed: layer " + std::to_string(layer) + " bundle " + std::to_string(b) +
                                  " has frequency " + std::to_string(freq[b]) + " (must be in [0, 1])");
    }
  }
  double* c = counts_.data() + l.offset;
  for (uint32_t b = 0; b < l.n_ff; ++b) c[b] = static_cast<double>(freq[b]) * weight_tokens;
  l.stored_tokens = weight_tokens;
  l.growth = 1.0;
}

double ActivationTracker::snapshot(size_t layer, std::span<double> counts) const {
  const Layer& l = layer_at(layer, "snapshot");
  if (counts.size() != l.n_ff) throw std::invalid_argument("activation tracker: snapshot: wrong output size");
  const double* c = counts_.data() + l.offset;
  for (uint32_t b = 0; b < l.n_ff; ++b) counts[b] = std::min(c[b], l.stored_tokens) / l.growth;
  return l.stored_tokens / l.growth;
}

void ActivationTracker::restore(size_t layer, std::span<const double> counts, double tokens) {
  Layer& l = layer_at(layer, "restore");
  const std::string where = "activation tracker: restore: layer " + std::to_string(layer);
  if (counts.size() != l.n_ff) {
    throw std::invalid_argument(where + ": " + std::to_string(counts.size()) + " counts for " + std::to_string(l.n_ff) + " bundles");
  }
  if (!std::isfinite(tokens) || tokens < 0.0) {
    throw std::invalid_argument(where + ": token weight " + std::to_string(tokens) + " (must be finite, >= 0)");
  }
  for (uint32_t b = 0; b < l.n_ff; ++b) {
    const double c = counts[b];
    if (!std::isfinite(c) || c < 0.0) {
      throw std::invalid_argument(where + " bundle " + std::to_string(b) + ": count " + std::to_string(c) + " (must be finite, >= 0)");
    }
    if (c > tokens * (1.0 + kCountSlack)) {
      throw std::invalid_argument(where + " bundle " + std::to_string(b) + ": count " + std::to_string(c) +
                                  " above the layer's token weight " + std::to_string(tokens));
    }
  }
  double* dst = counts_.data() + l.offset;
  for (uint32_t b = 0; b < l.n_ff; ++b) dst[b] = std::min(counts[b], tokens);
  l.stored_tokens = tokens;
  l.growth = 1.0;
}

}  // namespace ember::cache
