#include "core/synth/synth_weights.h"

#include <cmath>

#include "core/sampling/rng.h"

namespace ember::synth {

namespace {
uint64_t name_hash(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}
}  // namespace

float weight_std(const TensorSpec& spec) {
  const float fan_in = static_cast<float>(spec.ne[0]);
  switch (spec.role) {
    case TensorRole::Embedding: return 1.0f;
    case TensorRole::Norm: return 0.05f;
    // A logit std of ~3 gives a distribution with a clear head but many plausible tokens.
    case TensorRole::Output: return 3.0f / std::sqrt(fan_in);
    default: return 1.0f / std::sqrt(fan_in);
  }
}

void generate_rows(const TensorSpec& spec, uint64_t seed, uint64_t row_begin, uint64_t row_end, float* out) {
  const uint64_t n = spec.ne[0];
  const uint64_t tensor_seed = name_hash(spec.name) ^ (seed * 0x9E3779B97F4A7C15ull);
  // Uniform on [-a, a] has std a/sqrt(3); quantizers care about the range, not the shape.
  const float half_width = weight_std(spec) * std::sqrt(3.0f);
  const float mean = spec.role == TensorRole::Norm ? 1.0f : 0.0f;
  constexpr float kScale = 2.0f / 4294967296.0f;  // maps a 32-bit word to [0, 2)
  for (uint64_t r = row_begin; r < row_end; ++r) {
    uint64_t mix = tensor_seed + r;
    Rng rng(Rng::splitmix64(mix));
    float* row = out + (r - row_begin) * n;
    for (uint64_t i = 0; i + 1 < n; i += 2) {
      const uint64_t bits = rng.next_u64();
      row[i] = mean + half_width * (static_cast<float>(static_cast<uint32_t>(bits)) * kScale - 1.0f);
      row[i + 1] = mean + half_width * (static_cast<float>(static_cast<uint32_t>(bits >> 32)) * kScale - 1.0f);
    }
    if (n % 2 == 1) row[n - 1] = mean + half_width * (static_cast<float>(static_cast<uint32_t>(rng.next_u64())) * kScale - 1.0f);
  }
}

}  // namespace ember::synth
