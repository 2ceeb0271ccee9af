#include "core/synth/sparse_design.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/sampling/rng.h"

namespace ember::synth {

namespace {
// Uniform on [-half, half] from one generator; the std of such values is half / sqrt(3).
void fill_uniform_row(uint64_t key, float half, float* row, int64_t n) {
  uint64_t mix = key;
  Rng rng(Rng::splitmix64(mix));
  for (int64_t i = 0; i < n; ++i) row[i] = half * static_cast<float>(2.0 * rng.next_unit() - 1.0);
}

uint64_t layer_key(uint64_t seed, int32_t layer, uint64_t what) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(layer) << 32) ^ what;
  return Rng::splitmix64(x);
}

// A dense layer's keys are layer_key's alone; an expert's differ in the top byte.
uint64_t unit_key(uint64_t seed, FfnUnit unit, uint64_t what) {
  if (unit.expert >= 0) what ^= (static_cast<uint64_t>(unit.expert) + 1) << 56;
  return layer_key(seed, unit.layer, what);
}

constexpr uint64_t kBasisKey = 0xB0A515;
constexpr uint64_t kMixKey = 0x3117;
}  // namespace

int64_t default_predictor_rank(int64_t dim) { return std::max<int64_t>(32, dim / 8); }

int64_t predictor_directions(int64_t rank) {
  constexpr int64_t kBlock = 32;  // the Q8_0 / Q4_0 block
  return (rank >= 2 * kBlock ? rank - kBlock : rank - 1) / 2;
}

float predictor_constant(int64_t rank) {
  return 2.0f * std::sqrt(static_cast<float>(predictor_directions(rank)) / 3.0f);
}

float channel_gain(int64_t dim) {
  // The bias weight of a neuron firing with probability ~1e-3 is about 3 sigma; with
  // gain * kChannelValue = sqrt(3 dim) it equals 3 / sqrt(3 dim) = sqrt(3) / sqrt(dim), the
  // largest ordinary weight (uniform, std 1/sqrt(dim)).
  return std::sqrt(3.0f * static_cast<float>(dim)) / kChannelValue;
}

float residual_variance(const SparseParams& p, int32_t layer) {
  // Each block adds two branches of variance ~1/(2 n_layers) each at most (the residual-writing
  // projections are scaled by 1/sqrt(2 n_layers)); attention averages values over positions and
  // the sparse FFN's output is small, so the growth is about half of that.
  constexpr float kGrowthPerModel = 0.5f;
  const float attn_half = 0.5f / static_cast<float>(2 * p.n_layers);  // this layer's attention
  return 1.0f + kGrowthPerModel * static_cast<float>(layer) / static_cast<float>(p.n_layers) + attn_half;
}

double normal_upper_quantile(double q) {
  q = std::clamp(q, 1e-12, 1.0 - 1e-12);
  double lo = -10.0, hi = 10.0;
  for (int it = 0; it < 100; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (0.5 * std::erfc(mid / std::sqrt(2.0)) > q) lo = mid;
    else hi = mid;
  }
  return 0.5 * (lo + hi);
}

std::vector<double> target_frequencies(const SparseParams& p, FfnUnit unit) {
  const int64_t n = p.n_ff;
  std::vector<double> shape(static_cast<size_t>(n));
  // A per-unit permutation (multiplication by a unit mod n plus an offset), so the hottest
  // neurons are spread over the matrix, as in trained models, rather than being rows 0, 1, ...
  uint64_t mult = 1 + 2 * (unit_key(0, unit, 0x5EED) % static_cast<uint64_t>(n));
  while (std::gcd(mult, static_cast<uint64_t>(n)) != 1) mult += 2;
  const uint64_t offset = unit_key(1, unit, 0x0FF5E7) % static_cast<uint64_t>(n);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t rank = (static_cast<uint64_t>(i) * mult + offset) % static_cast<uint64_t>(n);
    shape[static_cast<size_t>(i)] =
        std::pow((static_cast<double>(rank) + 0.5) / static_cast<double>(n) + kPowerLawOffset, -kPowerLawExponent);
  }
  // Scale c so that mean(min(kMaxFrequency, c * shape)) == kTargetActive (monotone in c).
  double lo = 0.0, hi = 1.0;
  auto mean_at = [&](double c) {
    double s = 0.0;
    for (double v : shape) s += std::min(kMaxFrequency, c * v);
    return s / static_cast<double>(n);
  };
  while (mean_at(hi) < kTargetActive) hi *= 2.0;
  for (int it = 0; it < 60; ++it) {
    const double mid = 0.5 * (lo + hi);
    (mean_at(mid) < kTargetActive ? lo : hi) = mid;
  }
  for (double& v : shape) v = std::min(kMaxFrequency, hi * v);
  return shape;
}

void gate_basis(const SparseParams& p, uint64_t seed, FfnUnit unit, std::vector<float>& b) {
  const int64_t k = predictor_directions(p.predictor_rank), dim = p.dim;
  b.assign(static_cast<size_t>(k * dim), 0.0f);
  // std 1/sqrt(dim): each (B h)_j then has about the spread of one ordinary pre-activation.
  const float half = std::sqrt(3.0f / static_cast<float>(dim));
  for (int64_t j = 0; j < k; ++j) {
    float* row = b.data() + j * dim;
    fill_uniform_row(unit_key(seed, unit, kBasisKey) + static_cast<uint64_t>(j), half, row, dim);
    row[kBiasChannel] = 0.0f;
  }
}

void gate_mix_row(const SparseParams& p, uint64_t seed, FfnUnit unit, int64_t neuron, float* a) {
  const int64_t k = predictor_directions(p.predictor_rank);
  // std 1/sqrt(k): A_i . (B h) has unit spread, like an ordinary gate row.
  fill_uniform_row(unit_key(seed, unit, kMixKey) + static_cast<uint64_t>(neuron),
                   std::sqrt(3.0f / static_cast<float>(k)), a, k);
}

}  // namespace ember::synth
