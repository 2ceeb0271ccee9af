#include "core/synth/synth_weights.h"

#include <cmath>
#include <numeric>
#include <tuple>
#include <utility>
#include <vector>

#include "core/sampling/rng.h"
#include "core/synth/router_design.h"
#include "core/synth/sparse_weights.h"

namespace ember::synth {

namespace {
uint64_t name_hash(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

float role_std(const TensorSpec& spec) {
  const float fan_in = static_cast<float>(spec.ne[0]);
  switch (spec.role) {
    case TensorRole::Embedding: return 1.0f;
    case TensorRole::Norm: return 0.05f;
    // The random part of the logits (std ~1.5); the successor bonus below sits on top of it.
    case TensorRole::Output: return 1.5f / std::sqrt(fan_in);
    default: return 1.0f / std::sqrt(fan_in);
  }
}

// The successor of token t in the synthetic model's built-in "grammar": a fixed permutation of
// the vocabulary (multiplication by a unit mod n_vocab), so chains of successors are long cycles.
uint64_t successor_multiplier(uint64_t n_vocab) {
  uint64_t a = 7919;
  while (std::gcd(a, n_vocab) != 1) a += 2;
  return a;
}

void fill_uniform(const TensorSpec& spec, uint64_t seed, uint64_t r, float* row);

// Adds to output row j a multiple of the embedding of the token whose successor j is, so the
// logit of j is large (about kSuccessorLogit) when the last token's embedding dominates the
// residual stream. Why: activations are quantized to 8 bits before each matmul (as in
// llama.cpp), which makes any two correct engines differ by ~1% in the final hidden state; with
// purely random logits the top two tokens are often closer than that and greedy outputs of two
// correct engines part after a few tokens. A clear winner most of the time (while the random
// part and the context still move the rest) keeps cross-engine comparisons meaningful.
void add_successor_bonus(const TensorSpec& spec, uint64_t seed, uint64_t j, float* row, std::vector<float>& scratch) {
  constexpr float kSuccessorLogit = 12.0f;
  const uint64_t dim = spec.ne[0], n_vocab = spec.ne[1];
  // j = succ(t) = (t * a + 1) mod n  <=>  t = (j - 1) * a^-1 mod n; find t by inverting a once.
  const uint64_t a = successor_multiplier(n_vocab);
  uint64_t inv = 1;
  {  // the modular inverse of a, by extended Euclid
    int64_t t0 = 0, t1 = 1, r0 = static_cast<int64_t>(n_vocab), r1 = static_cast<int64_t>(a % n_vocab);
    while (r1 != 0) {
      const int64_t q = r0 / r1;
      std::tie(t0, t1) = std::make_pair(t1, t0 - q * t1);
      std::tie(r0, r1) = std::make_pair(r1, r0 - q * r1);
    }
    inv = static_cast<uint64_t>((t0 % static_cast<int64_t>(n_vocab) + static_cast<int64_t>(n_vocab)) %
                                static_cast<int64_t>(n_vocab));
  }
  const uint64_t t = ((j + n_vocab - 1) % n_vocab) * inv % n_vocab;
  TensorSpec embd;
  embd.name = "token_embd.weight";
  embd.role = TensorRole::Embedding;
  embd.ne = {dim, n_vocab};
  scratch.resize(dim);
  fill_uniform(embd, seed, t, scratch.data());
  // Sparse models: only the token's own (fast) dimensions, which the sparse embedding keeps from
  // this plain draw, not the slow part it shares with its neighbours on the successor cycle;
  // otherwise the tokens just before t on the cycle, t itself included, would get part of the
  // bonus and greedy text would loop back.
  // Mixtures of experts have the same slow dimensions (without the bias channel, of which the
  // bonus then lacks one ordinary dimension).
  const bool slow = spec.sparse.enabled() || spec.slow_embedding;
  if (slow) keep_fast_dimensions(scratch.data(), static_cast<int64_t>(dim));
  // The final normed hidden state h is ~ e_t / rms(x) with rms(x) ~ 1.2, so h . e_t ~ dim / 1.2
  // (or half of it with the fast dimensions alone).
  const float kept = slow ? 0.5f : 1.0f;
  const float gamma = kSuccessorLogit * 1.2f / (kept * static_cast<float>(dim));
  for (uint64_t i = 0; i < dim; ++i) row[i] += gamma * scratch[i];
}

}  // namespace

float weight_std(const TensorSpec& spec) { return role_std(spec) * spec.std_scale; }

uint64_t successor_token(uint64_t t, uint64_t n_vocab) { return (t * successor_multiplier(n_vocab) + 1) % n_vocab; }

namespace {

void fill_uniform(const TensorSpec& spec, uint64_t seed, uint64_t r, float* row) {
  const uint64_t n = spec.ne[0];
  const uint64_t tensor_seed = name_hash(spec.name) ^ (seed * 0x9E3779B97F4A7C15ull);
  // Uniform on [-a, a] has std a/sqrt(3); quantizers care about the range, not the shape.
  const float full_half_width = weight_std(spec) * std::sqrt(3.0f);
  const float mean = spec.role == TensorRole::Norm ? 1.0f : 0.0f;
  constexpr float kScale = 2.0f / 4294967296.0f;  // maps a 32-bit word to [0, 2)
  uint64_t mix = tensor_seed + r;
  Rng rng(Rng::splitmix64(mix));
  const bool quiet = r < spec.quiet_rows.size() && spec.quiet_rows[r] != 0;
  const float half_width = quiet ? 0.1f * full_half_width : full_half_width;
  for (uint64_t i = 0; i + 1 < n; i += 2) {
    const uint64_t bits = rng.next_u64();
    row[i] = mean + half_width * (static_cast<float>(static_cast<uint32_t>(bits)) * kScale - 1.0f);
    row[i + 1] = mean + half_width * (static_cast<float>(static_cast<uint32_t>(bits >> 32)) * kScale - 1.0f);
  }
  if (n % 2 == 1) row[n - 1] = mean + half_width * (static_cast<float>(static_cast<uint32_t>(rng.next_u64())) * kScale - 1.0f);
}

}  // namespace

void draw_plain_row(const TensorSpec& spec, uint64_t seed, uint64_t r, float* row) { fill_uniform(spec, seed, r, row); }

void generate_rows(const TensorSpec& spec, uint64_t seed, uint64_t row_begin, uint64_t row_end, float* out) {
  if (spec.sparse.enabled() && drawn_by_sparse_design(spec.role)) {
    generate_sparse_rows(spec, seed, row_begin, row_end, out);
    return;
  }
  if (spec.role == TensorRole::Embedding && spec.slow_embedding) {
    slow_embedding_rows(spec, seed, row_begin, row_end, out);
    return;
  }
  if (spec.role == TensorRole::Router) {
    generate_router_rows(spec, seed, row_begin, row_end, out);
    return;
  }
  const uint64_t n = spec.ne[0];
  std::vector<float> scratch;
  for (uint64_t r = row_begin; r < row_end; ++r) {
    float* row = out + (r - row_begin) * n;
    fill_uniform(spec, seed, r, row);
    const bool quiet = r < spec.quiet_rows.size() && spec.quiet_rows[r] != 0;
    if (spec.role == TensorRole::Output && !quiet) add_successor_bonus(spec, seed, r, row, scratch);
  }
}

}  // namespace ember::synth
