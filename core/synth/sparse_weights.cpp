#include "core/synth/sparse_weights.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/sampling/rng.h"
#include "core/synth/synth_weights.h"

namespace ember::synth {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string layer_prefix(int32_t layer) { return "blk." + std::to_string(layer) + "."; }

TensorSpec sibling(const TensorSpec& spec, const std::string& suffix, TensorRole role, std::vector<uint64_t> ne) {
  TensorSpec s;
  s.name = layer_prefix(spec.layer) + suffix;
  s.role = role;
  s.layer = spec.layer;
  s.expert = spec.expert;
  s.ne = std::move(ne);
  s.sparse = spec.sparse;
  return s;
}

FfnUnit unit_of(const TensorSpec& spec) { return {spec.layer, spec.expert}; }

// The row of the whole (stacked) tensor that neuron i of an expert view is: the plain draws of
// gate noise and up rows are keyed by it, so experts differ.
uint64_t stacked_row(const TensorSpec& spec, int64_t i) {
  const int64_t first = spec.expert < 0 ? 0 : static_cast<int64_t>(spec.expert) * spec.sparse.n_ff;
  return static_cast<uint64_t>(first + i);
}

// Down projection values addressed by (output dim d, neuron i) rather than drawn row by row, so
// that ffn_down (rows d) and ffn_down_t (rows i) hold the same matrix without either one being
// generated whole (ffn_down_exps / ffn_down_t_exps likewise, per expert). Row kBiasChannel is 0:
// nothing writes into the bias channel, and a mixture's output, a weighted sum of such rows,
// leaves it alone too.
float down_value(const TensorSpec& down_or_t, uint64_t seed, int64_t d, int64_t i) {
  if (d == kBiasChannel) return 0.0f;
  const auto& p = down_or_t.sparse;
  const float half = std::sqrt(3.0f / static_cast<float>(p.n_ff)) / std::sqrt(2.0f * static_cast<float>(p.n_layers));
  uint64_t x = (seed * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(down_or_t.layer) << 48) ^
               (static_cast<uint64_t>(d) * static_cast<uint64_t>(p.n_ff) + static_cast<uint64_t>(i));
  if (down_or_t.expert >= 0) x ^= (static_cast<uint64_t>(down_or_t.expert) + 1) << 40;
  const uint64_t bits = Rng::splitmix64(x);
  return half * static_cast<float>(static_cast<double>(bits >> 11) * 0x1.0p-52 - 1.0);
}

double norm_without_channel(const float* row, int64_t n) {
  double s = 0.0;
  for (int64_t d = 0; d < n; ++d)
    if (d != kBiasChannel) s += static_cast<double>(row[d]) * row[d];
  return std::sqrt(s);
}

// What a layer's gate needs to build any of its rows (and the predictor rows derived from them).
struct GateContext {
  std::vector<float> basis;           // B: (rank-1) x dim
  std::vector<double> basis_norm2;    // |B_j|^2
  std::vector<double> gate_frequency; // per neuron: P(gate > 0)
  float spread_scale = 1.0f;          // sqrt(residual variance) at this layer's FFN input
  float channel_input = 1.0f;         // ffn_norm gain * channel value (the un-normalized bias input)
};

GateContext gate_context(const TensorSpec& spec, uint64_t seed, bool need_basis) {
  GateContext c;
  const auto& p = spec.sparse;
  if (need_basis) {
    gate_basis(p, seed, unit_of(spec), c.basis);
    c.basis_norm2.resize(static_cast<size_t>(predictor_directions(p.predictor_rank)));
    for (size_t j = 0; j < c.basis_norm2.size(); ++j) {
      const double n = norm_without_channel(c.basis.data() + j * static_cast<size_t>(p.dim), p.dim);
      c.basis_norm2[j] = n * n;
    }
  }
  c.gate_frequency = target_frequencies(p, unit_of(spec));
  if (p.activation == FfnActivation::DReLU)
    for (double& f : c.gate_frequency) f /= kUpActiveFraction;
  c.spread_scale = std::sqrt(residual_variance(p, spec.layer));
  c.channel_input = channel_gain(p.dim) * kChannelValue;
  return c;
}

// The bias-channel weight that makes a row's pre-activation positive with probability `p_fire`,
// given that the rest of it spreads like norm * sqrt(residual variance) (over RMS-normed input).
float bias_weight(double p_fire, double norm, const GateContext& c) {
  return static_cast<float>(-normal_upper_quantile(p_fire) * norm * c.spread_scale / c.channel_input);
}

// The noise row E_i of gate row i (the gate's own generator at a tenth of the usual spread) and
// its mix row A_i; returns the gate row's bias-channel weight and (in *norm) the spread estimate
// it is built on: |A_i B + E_i| estimated as sqrt(sum_j A_ij^2 |B_j|^2 + |E_i|^2) (B's rows are
// nearly orthogonal), so that the predictor's fc2 gets the very same bias without forming the row.
float gate_noise_and_bias(const TensorSpec& gate, uint64_t seed, const GateContext& c, int64_t i, float* e_row,
                          float* mix, double* norm_out) {
  const auto& p = gate.sparse;
  const int64_t k = predictor_directions(p.predictor_rank);
  gate_mix_row(p, seed, unit_of(gate), i, mix);
  TensorSpec noise = gate;
  noise.std_scale = kGateNoise;
  draw_plain_row(noise, seed, stacked_row(gate, i), e_row);
  e_row[kBiasChannel] = 0.0f;
  const double e_norm = norm_without_channel(e_row, p.dim);
  double norm2 = e_norm * e_norm;
  for (int64_t j = 0; j < k; ++j) norm2 += static_cast<double>(mix[j]) * mix[j] * c.basis_norm2[static_cast<size_t>(j)];
  const double norm = std::sqrt(norm2);
  if (norm_out) *norm_out = norm;
  return bias_weight(c.gate_frequency[static_cast<size_t>(i)], norm, c);
}

// Gate rows [begin, end) = A B + E with their bias weights. Rows are built kRowBlock at a time so
// that each basis row is read once per block (the basis of a big preset does not fit in cache);
// every element still sums its terms in the same order.
void gate_rows(const TensorSpec& gate, uint64_t seed, const GateContext& c, int64_t begin, int64_t end, float* out) {
  constexpr int64_t kRowBlock = 8;
  const auto& p = gate.sparse;
  const int64_t k = predictor_directions(p.predictor_rank), dim = p.dim;
  std::vector<float> mix(static_cast<size_t>(kRowBlock * k));
  float bias[kRowBlock];
  for (int64_t b0 = begin; b0 < end; b0 += kRowBlock) {
    const int64_t nb = std::min(kRowBlock, end - b0);
    for (int64_t r = 0; r < nb; ++r)
      bias[r] = gate_noise_and_bias(gate, seed, c, b0 + r, out + (b0 - begin + r) * dim, mix.data() + r * k, nullptr);
    for (int64_t j = 0; j < k; ++j) {
      const float* bj = c.basis.data() + j * dim;
      for (int64_t r = 0; r < nb; ++r) {
        const float a = mix[static_cast<size_t>(r * k + j)];
        float* row = out + (b0 - begin + r) * dim;
        for (int64_t d = 0; d < dim; ++d) row[d] += a * bj[d];
      }
    }
    for (int64_t r = 0; r < nb; ++r) out[(b0 - begin + r) * dim + kBiasChannel] = bias[r];
  }
}

// Where each token sits on the successor permutation's cycles: (cycle's first token, index along it).
struct ChainPlace {
  uint64_t cycle = 0;
  uint64_t index = 0;
};
std::vector<ChainPlace> chain_places(uint64_t n_vocab) {
  std::vector<ChainPlace> place(n_vocab);
  std::vector<uint8_t> seen(n_vocab, 0);
  for (uint64_t start = 0; start < n_vocab; ++start) {
    uint64_t t = start, k = 0;
    while (!seen[t]) {
      seen[t] = 1;
      place[t] = {start, k++};
      t = successor_token(t, n_vocab);
    }
  }
  return place;
}

double unit_hash(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  return static_cast<double>(Rng::splitmix64(x) >> 11) * 0x1.0p-53;
}

// Locality: the odd dimensions of a token's embedding are a slow function of its place on its
// successor cycle (sinusoids of a few tens of tokens' period, variance 1 like the other
// dimensions), so the tokens of a greedy text, which mostly follow the cycle, share half their
// embedding with their neighbours and their FFN active sets overlap.
void add_slow_part(uint64_t seed, const ChainPlace& place, float* row, int64_t dim) {
  constexpr double kTwoPi = 6.283185307179586;
  for (int64_t d = 0; d < dim; ++d) {
    if (!is_slow_dimension(d)) continue;
    const double freq = kSlowFrequencyMin + (kSlowFrequencyMax - kSlowFrequencyMin) * unit_hash(seed, static_cast<uint64_t>(d));
    const double phase = kTwoPi * unit_hash(seed ^ place.cycle, 0x10000 + static_cast<uint64_t>(d));
    row[d] = static_cast<float>(std::sqrt(2.0) * std::sin(kTwoPi * freq * static_cast<double>(place.index) + phase));
  }
}

void slow_embedding_row(const TensorSpec& spec, uint64_t seed, const ChainPlace& place, uint64_t r, float* row) {
  draw_plain_row(spec, seed, r, row);
  add_slow_part(seed, place, row, static_cast<int64_t>(spec.ne[0]));
}

void norm_row(const TensorSpec& spec, uint64_t seed, float* row) {
  draw_plain_row(spec, seed, 0, row);
  if (ends_with(spec.name, "ffn_norm.weight")) row[kBiasChannel] = channel_gain(spec.sparse.dim);
  else row[kBiasChannel] = 0.0f;  // attention and the output head do not see the bias channel
}

}  // namespace

void slow_embedding_rows(const TensorSpec& spec, uint64_t seed, uint64_t row_begin, uint64_t row_end, float* out) {
  const auto places = chain_places(spec.ne[1]);
  for (uint64_t r = row_begin; r < row_end; ++r)
    slow_embedding_row(spec, seed, places[r], r, out + (r - row_begin) * spec.ne[0]);
}

void keep_fast_dimensions(float* row, int64_t dim) {
  for (int64_t d = 0; d < dim; ++d)
    if (is_slow_dimension(d)) row[d] = 0.0f;  // the slow part (add_slow_part)
  row[kBiasChannel] = 0.0f;
}

bool drawn_by_sparse_design(TensorRole role) {
  switch (role) {
    case TensorRole::Embedding:
    case TensorRole::Norm:
    case TensorRole::AttnOut:
    case TensorRole::FfnGate:
    case TensorRole::FfnUp:
    case TensorRole::FfnDown:
    case TensorRole::FfnDownT:
    case TensorRole::PredictorFc1:
    case TensorRole::PredictorFc2: return true;
    default: return false;
  }
}

namespace {

// Rows [row_begin, row_end) of a dense layer's tensor or of one expert's view of a stacked one.
void unit_rows(const TensorSpec& spec, uint64_t seed, uint64_t row_begin, uint64_t row_end, float* out) {
  const auto& p = spec.sparse;
  const auto n = static_cast<int64_t>(spec.ne[0]);
  const int64_t k = predictor_directions(p.predictor_rank);
  GateContext ctx;
  if (spec.role == TensorRole::FfnGate || spec.role == TensorRole::FfnUp || spec.role == TensorRole::PredictorFc1 ||
      spec.role == TensorRole::PredictorFc2)
    ctx = gate_context(spec, seed, spec.role != TensorRole::FfnUp);  // fc2 needs the basis norms
  std::vector<float> scratch, mix, norm_weights;
  std::vector<ChainPlace> places;
  if (spec.role == TensorRole::Embedding) places = chain_places(spec.ne[1]);
  if (spec.role == TensorRole::PredictorFc1) {
    norm_weights.resize(static_cast<size_t>(p.dim));
    norm_row(sibling(spec, "ffn_norm.weight", TensorRole::Norm, {static_cast<uint64_t>(p.dim)}), seed,
             norm_weights.data());
  }
  for (uint64_t r = row_begin; r < row_end; ++r) {
    float* row = out + (r - row_begin) * static_cast<uint64_t>(n);
    const auto ri = static_cast<int64_t>(r);
    switch (spec.role) {
      case TensorRole::Embedding:
        slow_embedding_row(spec, seed, places[r], r, row);
        row[kBiasChannel] = kChannelValue;
        break;
      case TensorRole::Norm: norm_row(spec, seed, row); break;
      case TensorRole::AttnOut:
        draw_plain_row(spec, seed, r, row);
        if (ri == kBiasChannel)
          for (int64_t d = 0; d < n; ++d) row[d] = 0.0f;
        break;
      case TensorRole::FfnGate:
        gate_rows(spec, seed, ctx, static_cast<int64_t>(row_begin), static_cast<int64_t>(row_end), out);
        return;  // all rows at once
      case TensorRole::FfnUp:
        draw_plain_row(spec, seed, stacked_row(spec, ri), row);
        row[kBiasChannel] = 0.0f;
        // dReLU: up is positive for kUpActiveFraction of tokens; ReLU: up stays an unbiased linear term.
        if (p.activation == FfnActivation::DReLU)
          row[kBiasChannel] = bias_weight(kUpActiveFraction, norm_without_channel(row, n), ctx);
        break;
      case TensorRole::FfnDown:
        for (int64_t i = 0; i < n; ++i) row[i] = down_value(spec, seed, ri, i);
        break;
      case TensorRole::FfnDownT:
        for (int64_t d = 0; d < n; ++d) row[d] = down_value(spec, seed, d, ri);
        break;
      case TensorRole::PredictorFc1: {
        // Rows j < K: B_j scaled by ffn_norm's weights (the predictor reads the residual stream
        // before the norm); rows K + j: the same negated, so relu(z_j) - relu(-z_j) = z_j passes
        // the low-rank outputs whatever their sign. Row 2K: the bias channel alone (outputs the
        // constant c). Any later rows (padding of the constant's block) are zero.
        for (int64_t d = 0; d < n; ++d) row[d] = 0.0f;
        if (ri < 2 * k) {
          const float sign = ri < k ? 1.0f : -1.0f;
          const float* b = ctx.basis.data() + (ri % k) * p.dim;
          for (int64_t d = 0; d < n; ++d) row[d] = sign * b[d] * norm_weights[static_cast<size_t>(d)];
        } else if (ri == predictor_constant_row(p.predictor_rank)) {
          row[kBiasChannel] = predictor_constant(p.predictor_rank) / kChannelValue;
        }
        break;
      }
      case TensorRole::PredictorFc2: {
        // score_i = A_i . (B w x) + coef * c = rms(x) * (low-rank part of gate_i) + bias term, which
        // has the sign of the gate up to its noise E; the margin (in units of the gate's spread)
        // trades precision for recall. Every value is of the size of the A_ij: nothing cancels.
        scratch.resize(static_cast<size_t>(p.dim));
        mix.resize(static_cast<size_t>(k));
        double gate_norm = 0.0;
        const char* gate_name = spec.expert < 0 ? "ffn_gate.weight" : "ffn_gate_exps.weight";
        const float bias = gate_noise_and_bias(sibling(spec, gate_name, TensorRole::FfnGate,
                                                       {static_cast<uint64_t>(p.dim), static_cast<uint64_t>(p.n_ff)}),
                                               seed, ctx, ri, scratch.data(), mix.data(), &gate_norm);
        for (int64_t c = 0; c < n; ++c) row[c] = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
          row[j] = mix[static_cast<size_t>(j)];
          row[k + j] = -mix[static_cast<size_t>(j)];
        }
        const double constant_term =
            static_cast<double>(bias) * ctx.channel_input + p.predictor_margin * gate_norm * ctx.spread_scale;
        row[predictor_constant_row(p.predictor_rank)] =
            static_cast<float>(constant_term / predictor_constant(p.predictor_rank));
        break;
      }
      default: draw_plain_row(spec, seed, r, row); break;
    }
  }
}

}  // namespace

void generate_sparse_rows(const TensorSpec& spec, uint64_t seed, uint64_t row_begin, uint64_t row_end, float* out) {
  if (spec.ne.size() != 3) {
    unit_rows(spec, seed, row_begin, row_end, out);
    return;
  }
  // A stacked expert tensor {row length, rows per expert, n_experts}: each expert is a sparse FFN
  // of its own, drawn through a view of its rows (a slice may span several experts).
  const uint64_t per_expert = spec.ne[1];
  TensorSpec view = spec;
  view.ne = {spec.ne[0], per_expert};
  for (uint64_t r = row_begin; r < row_end;) {
    const uint64_t e = r / per_expert, end = std::min(row_end, (e + 1) * per_expert);
    view.expert = static_cast<int32_t>(e);
    unit_rows(view, seed, r - e * per_expert, end - e * per_expert, out + (r - row_begin) * spec.ne[0]);
    r = end;
  }
}

}  // namespace ember::synth
