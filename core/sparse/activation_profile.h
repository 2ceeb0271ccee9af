#pragma once
// Per-layer, per-neuron activation statistics of a model over a calibration text. Written by
// `ember profile`; read by `ember pack` (bundles ordered hottest first, frequencies stored in the
// pack) and by the threshold mode (CATS thresholds calibrated to a target sparsity).
//
// File: a small GGUF (magic "GGUF", no vocabulary) with
//   ember.profile.version u32 = 1, ember.profile.tokens u64, ember.profile.activation string,
//   ember.profile.n_layer u32, ember.profile.n_ff u32,
//   ember.profile.active_fraction / .locality / .predictor_recall / .predictor_precision f32[n_layer]
//   (NaN where there is no predictor),
//   tensors blk.N.neuron_freq F32 {n_ff} and blk.N.gate_magnitude_pct F32 {kPercentiles}.
// Layout documented in docs/profile-format.md.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace ember {

struct LayerActivationProfile {
  // (n_ff) share of the profiled tokens in which the neuron was active: h != 0 for ReLU-family
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

// Writes atomically (a temporary file renamed over path). Throws std::runtime_error on I/O errors.
void save_activation_profile(const ActivationProfile& profile, const std::string& path);
// Throws std::runtime_error naming the file and the problem (not a profile, bad sizes, NaNs in
// frequencies, ...).
ActivationProfile load_activation_profile(const std::string& path);
// Throws std::invalid_argument when the profile was not made for a model of this shape.
void check_profile_matches(const ActivationProfile& profile, int64_t n_layer, int64_t n_ff);

}  // namespace ember
