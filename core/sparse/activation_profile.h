#pragma once
// Per-layer, per-neuron activation statistics of a model over a calibration text. Written by
// `ember profile`; read by `ember pack` (bundles ordered hottest first, frequencies stored in the
// pack) and by the threshold mode (CATS thresholds calibrated to a target sparsity).
//
// File: a small GGUF (magic "GGUF", no vocabulary) with
//   ember.profile.version u32 = 1, ember.profile.tokens u64, ember.profile.activation string,
//   ember.profile.n_layer u32, ember.profile.n_ff u32, ember.profile.n_expert u32 (mixtures of
//   experts only),
//   ember.profile.active_fraction / .locality / .predictor_recall / .predictor_precision f32[n_layer]
//   (NaN where there is no predictor),
//   tensors blk.N.neuron_freq F32 {n_ff} and blk.N.gate_magnitude_pct F32 {kPercentiles}.
// Layout documented in docs/profile-format.md.
//
// A mixture of experts is profiled per unit, one (layer, expert) pair, u = layer * n_expert +
// expert, each unit a "layer" of the file. A unit's frequencies are joint: the share of ALL
// profiled tokens that were routed to the expert and in which the neuron was active (the expert's
// routing share times the neuron's frequency among its tokens), since that is what a neuron cache
// shared by every expert of the model gains from keeping it. Summed over a layer's experts, the
// mean frequency of a unit is k x the layer's active fraction per routed (token, expert) pair.
// Everything else of a unit (active fraction, locality, percentiles, predictor figures) is over
// the tokens routed to that expert only, in their order: conditional on the routing.
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace ember {

struct LayerActivationProfile {
  // (n_ff) share of the profiled tokens in which the neuron was active (for a mixture-of-experts
  // unit: routed to the expert and active, see above): h != 0 for ReLU-family
  // activations; for SiLU, among the half of its token's neurons with the largest |silu(gate)|
  // (CATS at sparsity 0.5), since a SiLU neuron is never exactly 0.
  std::vector<float> frequency;
  // (kPercentiles) |act(gate)| percentiles over every (token, neuron) of the layer:
  // gate_magnitude[k] is the value below which k / (kPercentiles - 1) of the magnitudes lie.
  std::vector<float> gate_magnitude;
  double active_fraction = 0.0;  // mean share of the layer's neurons active per token
  double locality = 0.0;         // mean share of a token's active neurons also active in the token before
  // The model's predictor at its file threshold against the true active set (NaN without one).
  double predictor_recall = std::numeric_limits<double>::quiet_NaN();
  double predictor_precision = std::numeric_limits<double>::quiet_NaN();
};

struct ActivationProfile {
  static constexpr int kPercentiles = 1001;  // 0.1 % steps
  std::string activation;  // activation_name(): "silu", "relu", "drelu"
  uint64_t tokens = 0;     // tokens profiled (every one through every layer)
  int64_t n_ff = 0;
  int64_t n_expert = 0;    // > 0: a mixture of experts, layers holds n_layer * n_expert units
  std::vector<LayerActivationProfile> layers;

  // The |act(gate)| below which `sparsity` (in [0, 1)) of the layer's magnitudes lay: the CATS
  // threshold that skips that share of neurons on text like the calibration text.
  float threshold_for_sparsity(int64_t layer, double sparsity) const;
  std::vector<float> thresholds_for_sparsity(double sparsity) const;  // one per layer
  // Share of all activations of the layer carried by its hottest `share` of neurons (power law:
  // TurboSparse-like models reach >= 0.7 at share 0.2).
  double hot_share(int64_t layer, double share) const;
  // The layer's neuron ids ordered hottest first (ties: lower id first).
  std::vector<int32_t> hot_order(int64_t layer) const;
};

// Share of the frequencies' sum carried by the largest `share` of them (ActivationProfile::hot_share
// of any set of neurons, e.g. all experts of a layer together).
double hot_share(std::span<const float> frequency, double share);

// Writes atomically (a temporary file renamed over path). Throws std::runtime_error on I/O errors.
void save_activation_profile(const ActivationProfile& profile, const std::string& path);
// Throws std::runtime_error naming the file and the problem (not a profile, bad sizes, NaNs in
// frequencies, ...).
ActivationProfile load_activation_profile(const std::string& path);
// Throws std::invalid_argument when the profile was not made for a model of this shape: it must
// hold n_layer * max(1, n_expert) layers of n_ff and the same n_expert (0: a dense FFN), so a
// dense profile never passes for a mixture of experts nor the other way round.
void check_profile_matches(const ActivationProfile& profile, int64_t n_layer, int64_t n_ff, int64_t n_expert = 0);

}  // namespace ember
