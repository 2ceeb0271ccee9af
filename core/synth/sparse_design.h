#pragma once
// The arithmetic that makes a synthetic ReLU / dReLU model TurboSparse-like: ~90% of FFN neurons
// inactive per token, a power-law activation frequency over neurons, and gates that a small
// PowerInfer predictor can forecast. Nothing here is a side channel: the sparsity comes out of the
// weights through the model's ordinary arithmetic. See docs/synthetic-models.md for the why.
//
// In short:
// - Residual dimension kBiasChannel ("the bias channel") holds the constant kChannelValue in every
//   token embedding. Nothing writes into it (row kBiasChannel of attn_output and ffn_down is 0),
//   attention and the output head do not read it (attn_norm and output_norm weigh it 0), and
//   ffn_norm weighs it channel_gain(), so after RMSNorm it is a large, nearly constant input.
// - Gate row i puts a negative weight on that channel: a per-neuron bias chosen so that the gate
//   is positive with probability target_frequency(i) (a power law over a per-layer permutation of
//   the neurons), given the spread of the rest of the pre-activation.
// - The rest of each gate row is low rank plus a little noise, G = A B + E, with as many
//   directions (rows of B) as a predictor fc2 relu(fc1 x) of rank `predictor_rank` can pass
//   exactly: fc1 holds +B_j and -B_j and fc2 +A_ij and -A_ij, and relu(z) - relu(-z) = z, so the
//   score is A_i B x with no large terms that cancel (whose rounding a quantized predictor would
//   amplify). The per-neuron constant comes from one fc1 row that reads the bias channel alone,
//   in an fc2 block of its own (see predictor_directions).
// - dReLU: the up rows get a positive bias (relu(up) > 0 for ~kUpActiveFraction of tokens); the
//   gate's target frequency is divided by it, so the product fires at target_frequency(i).
#include <cstdint>
#include <vector>

#include "core/model/model_config.h"  // FfnActivation (the enum only: no link dependency)

namespace ember::synth {

inline constexpr int64_t kBiasChannel = 0;
inline constexpr float kChannelValue = 2.0f;        // its value in every embedding
inline constexpr double kTargetActive = 0.10;      // mean firing probability of a neuron
inline constexpr double kMaxFrequency = 0.85;      // hottest neurons' firing probability
inline constexpr double kPowerLawExponent = 1.5;   // f ~ (rank / n_ff + kPowerLawOffset)^-1.5
inline constexpr double kPowerLawOffset = 0.01;
inline constexpr double kUpActiveFraction = 0.9;   // dReLU: P(up > 0)
inline constexpr float kGateNoise = 0.1f;          // |E| relative to |A B| in gate rows
inline constexpr double kSlowFrequencyMin = 0.01;  // embedding's slow part: cycles per token
inline constexpr double kSlowFrequencyMax = 0.06;
inline constexpr float kPredictorMargin = 0.1f;    // in units of the gate's spread: recall over precision
inline constexpr float kPredictorMargin4Bit = 0.25f;  // the same for 4-bit gates (Q4_0, Q4_K)

struct SparseParams {
  FfnActivation activation = FfnActivation::SiLU;
  int64_t dim = 0;
  int64_t n_ff = 0;
  int64_t n_layers = 0;
  int64_t predictor_rank = 0;  // rows of fc1: 2 per low-rank direction, 1 constant row, padding
  bool predictor = false;
  bool down_transposed = false;
  // How far above the gate's low-rank part (in units of the gate's spread) the predictor's
  // threshold sits: larger for coarser quantization, whose rounding the predictor cannot see.
  float predictor_margin = kPredictorMargin;
  bool enabled() const { return activation != FfnActivation::SiLU; }
};

// The FFN the design shapes: a dense layer's, or expert `expert` of a mixture's layer. Every
// expert is a sparse FFN of its own (its own neuron permutation, gate basis and mix rows), as in
// TurboSparse-Mixtral; a dense layer (expert -1) draws exactly what it drew before experts existed.
struct FfnUnit {
  int32_t layer = 0;
  int32_t expert = -1;
};

// Rank used when the option says 0: n_embd / 8 (a multiple of 32, since n_embd is of 256).
int64_t default_predictor_rank(int64_t dim);

// The predictor's layout for rank r: fc1 rows [0, K) are +B_j, rows [K, 2K) are -B_j, row 2K
// reads the bias channel alone (the constant), rows after it are zero. K = (r - 32) / 2 when
// r >= 64, so that for r a multiple of 32 the constant's fc2 column starts a 32-element block of
// its own: in Q8_0 / Q4_0 a block's scale follows its largest value, and a lone non-zero value
// is stored exactly up to the F16 rounding of the scale (2^-11), so the constant neither coarsens the A_i values nor is rounded by them.
// Smaller ranks (the tiny preset's 32) share the block: K = (r - 1) / 2. K is also the number of
// low-rank directions of the gates, which the predictor therefore reproduces up to E.
int64_t predictor_directions(int64_t rank);
inline int64_t predictor_constant_row(int64_t rank) { return 2 * predictor_directions(rank); }

// What fc1's constant row outputs: 2 sqrt(K / 3), so that a typical neuron's constant
// coefficient in fc2 (its bias, ~2 gate spreads, divided by this) is about as large as its
// largest direction coefficient sqrt(3 / K); that matters only where the block is shared.
float predictor_constant(int64_t rank);

// Weight of the bias channel in ffn_norm: large enough that the per-neuron biases in the gate
// rows stay within the range of the other weights (so quantization treats them well).
float channel_gain(int64_t dim);

// Expected mean square of the residual stream's ordinary dimensions at the FFN input of `layer`:
// 1 from the embedding plus what the (down-scaled) attention and FFN branches add.
float residual_variance(const SparseParams& p, int32_t layer);

// The firing probability the design gives each neuron of `unit` (of the whole neuron: gate and,
// for dReLU, up): a power law over a per-unit permutation of the neurons, mean kTargetActive.
std::vector<double> target_frequencies(const SparseParams& p, FfnUnit unit);

// beta with P(Z > beta) = p for a standard normal Z (p in (0, 1)).
double normal_upper_quantile(double p);

// The low-rank factors of a unit's gate: B (K = predictor_directions rows of length dim, zero on
// the bias channel) and row i of A (K values). Deterministic in (seed, unit, row).
void gate_basis(const SparseParams& p, uint64_t seed, FfnUnit unit, std::vector<float>& b);
void gate_mix_row(const SparseParams& p, uint64_t seed, FfnUnit unit, int64_t neuron, float* a);

}  // namespace ember::synth
