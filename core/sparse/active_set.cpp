#include "core/sparse/active_set.h"

#include <algorithm>
#include <cmath>

namespace ember {

int64_t select_above(const float* scores, int64_t n, float threshold, int32_t* out) {
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[k] = static_cast<int32_t>(i);
    k += scores[i] > threshold ? 1 : 0;  // branch-free: the outcome is close to random per neuron
  }
  return k;
}

int64_t select_relu_active(const float* gate, const float* up, int64_t n, FfnActivation act, int32_t* out) {
  int64_t k = 0;
  if (act == FfnActivation::DReLU) {
    for (int64_t i = 0; i < n; ++i) {
      out[k] = static_cast<int32_t>(i);
      k += (gate[i] > 0.0f && up[i] > 0.0f) ? 1 : 0;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      out[k] = static_cast<int32_t>(i);
      k += gate[i] > 0.0f ? 1 : 0;
    }
  }
  return k;
}

int64_t select_by_gate_magnitude(const float* gate, int64_t n, FfnActivation act, float threshold, int32_t* out) {
  int64_t k = 0;
  if (!(threshold > 0.0f)) {
    // Nothing lies below a threshold of 0, but a ReLU-family gate at or below 0 gives an activation
    // of exactly 0: listing it would cost its rows for nothing (a relu model whose calibrated
    // threshold for a sparsity it already exceeds is 0 would otherwise run fully dense).
    if (is_relu_family(act)) return select_above(gate, n, 0.0f, out);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(i);
    return n;
  }
  for (int64_t i = 0; i < n; ++i) {
    out[k] = static_cast<int32_t>(i);
    k += std::fabs(gate_activation(act, gate[i])) >= threshold ? 1 : 0;
  }
  return k;
}

float gate_magnitude_quantile(const float* gate, int64_t n, FfnActivation act, float skip_fraction, float* scratch) {
  if (!(skip_fraction > 0.0f) || n <= 0) return 0.0f;
  const auto skip = static_cast<int64_t>(std::floor(static_cast<double>(skip_fraction) * static_cast<double>(n)));
  if (skip <= 0) return 0.0f;
  if (skip >= n) return INFINITY;
  for (int64_t i = 0; i < n; ++i) scratch[i] = std::fabs(gate_activation(act, gate[i]));
  // The skip-th smallest magnitude: the `skip` below it are dropped (ties may keep a few more).
  std::nth_element(scratch, scratch + skip, scratch + n);
  return scratch[skip];
}

int64_t count_nonzero_at(const float* h, const int32_t* ids, int64_t n_ids) {
  int64_t k = 0;
  for (int64_t j = 0; j < n_ids; ++j) k += h[ids[j]] != 0.0f ? 1 : 0;
  return k;
}

int64_t count_nonzero(const float* h, int64_t n) {
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) k += h[i] != 0.0f ? 1 : 0;
  return k;
}

}  // namespace ember
