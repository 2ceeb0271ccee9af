#include "core/synth/router_design.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/synth/sparse_weights.h"
#include "core/synth/synth_weights.h"

namespace ember::synth {

namespace {

double dot(const float* a, const float* b, uint64_t n) {
  double s = 0.0;
  for (uint64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Directions of the FFN input h = RMSNorm(x) * w (w: the layer's ffn_norm weight) that every
// token shares. A router row with a component c along one of them adds the same c . h to that
// expert's logit for every token: a fixed bias per expert, which sends most tokens to the few
// experts it favours (a learned router is trained against this by a load-balancing loss; a random
// one is not). The direction known without a forward pass is w itself: it is what RMSNorm and the
// norm weights (mean 1) make of any offset the residual stream carries equally in every dimension.
// In a sparse mixture the bias channel is common to all tokens too (a large constant after
// ffn_norm): it is left out of w, and generate_router_rows zeroes every row there. Returned
// orthonormal.
std::vector<std::vector<float>> common_directions(const TensorSpec& spec, uint64_t seed) {
  const uint64_t dim = spec.ne[0];
  TensorSpec norm;
  norm.name = "blk." + std::to_string(spec.layer) + ".ffn_norm.weight";
  norm.role = TensorRole::Norm;
  norm.layer = spec.layer;
  norm.ne = {dim};
  std::vector<float> w(dim);
  draw_plain_row(norm, seed, 0, w.data());
  if (spec.sparse.enabled()) w[kBiasChannel] = 0.0f;
  const auto len = static_cast<float>(std::sqrt(dot(w.data(), w.data(), dim)));
  for (float& v : w) v /= len;
  return {w};
}

// Rescales the row's slow and fast parts so the slow ones hold kRouterSlowShare of its norm^2.
void lean_on_slow_dimensions(float* row, uint64_t dim) {
  double slow = 0.0, fast = 0.0;
  for (uint64_t i = 0; i < dim; ++i)
    (is_slow_dimension(static_cast<int64_t>(i)) ? slow : fast) += double(row[i]) * row[i];
  const auto slow_gain = static_cast<float>(std::sqrt(kRouterSlowShare / slow));
  const auto fast_gain = static_cast<float>(std::sqrt((1.0 - kRouterSlowShare) / fast));
  for (uint64_t i = 0; i < dim; ++i) row[i] *= is_slow_dimension(static_cast<int64_t>(i)) ? slow_gain : fast_gain;
}

}  // namespace

void generate_router_rows(const TensorSpec& spec, uint64_t seed, uint64_t row_begin, uint64_t row_end, float* out) {
  const uint64_t dim = spec.ne[0];
  const auto common = common_directions(spec, seed);
  for (uint64_t r = row_begin; r < row_end; ++r) {
    float* row = out + (r - row_begin) * dim;
    draw_plain_row(spec, seed, r, row);
    // A weight on the bias channel would be a fixed per-expert bias (the channel is constant).
    if (spec.sparse.enabled()) row[kBiasChannel] = 0.0f;
    lean_on_slow_dimensions(row, dim);
    for (const auto& u : common) {
      const auto c = static_cast<float>(dot(row, u.data(), dim));
      for (uint64_t i = 0; i < dim; ++i) row[i] -= c * u[i];
    }
    const auto scale = static_cast<float>(kRouterLogitStd / std::sqrt(dot(row, row, dim)));
    for (uint64_t i = 0; i < dim; ++i) row[i] *= scale;
  }
}

}  // namespace ember::synth
