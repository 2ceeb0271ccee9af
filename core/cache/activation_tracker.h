#pragma once
// Live activation statistics for online adaptation: per layer, how often each bundle
// was in the predictor's active list, with exponential decay so that recent traffic dominates.
// Its frequencies, fitted to the pack's prefix order (prefix_frequencies.h), are what a periodic
// re-plan of the hot set feeds to plan_budget; tracker_file.h saves it on shutdown and reloads it
// at start, so a restarted daemon starts warm.
//
// Bundle numbers are positions in the pack's order (what the predictor's active list holds), not
// the model's original neuron ids.
//
// Decay: a token t steps back has weight d^t with d = 2^(-1 / half_life), so after half_life
// tokens in which a bundle never fires its count has halved. Applying d to every count per token
// would cost O(n_ff); instead each layer keeps a growth factor g that is multiplied by 1/d per
// token, and a token adds g (not 1) to its active bundles and to the layer's token weight.
// Stored values are therefore the true decayed values times g: record() touches only the active
// bundles (O(n_active), no allocation), a frequency is a ratio in which g cancels, and
// tokens()/count() divide by g. When g passes 2^64 (every 64 half-lives) the layer is divided
// through by g once (O(n_ff), about every 1.3 M tokens at the default half-life).
//
// Not thread-safe: record() is called by the single decode thread; frequency(), snapshot() and
// the file functions must not run concurrently with it (call them on that thread between steps,
// or after the engine stopped, e.g. on shutdown).
#include <cstdint>
#include <span>
#include <vector>

namespace ember::cache {

// Traffic of ~1.4 x this many tokens makes up the live weight of a layer (sum of d^t).
inline constexpr double kDefaultHalfLifeTokens = 20000.0;

class ActivationTracker {
 public:
  // One entry of n_ff per layer. half_life_tokens >= 1, or +infinity for no decay. Throws
  // std::invalid_argument naming the problem (no layers, n_ff 0 or above INT32_MAX, bad half-life).
  explicit ActivationTracker(std::span<const uint32_t> n_ff, double half_life_tokens = kDefaultHalfLifeTokens);

  size_t n_layers() const { return layers_.size(); }
  uint32_t n_ff(size_t layer) const { return layers_.at(layer).n_ff; }
  double half_life() const { return half_life_; }
  // Applies from the next token on; the counts so far are kept (e.g. a configured half-life that
  // differs from the one a loaded file was written with). Same checks as the constructor.
  void set_half_life(double half_life_tokens);

  // One token through `layer`: every bundle in `active` fired. The list must not repeat a bundle
  // (the predictor's does not; a repeat would be counted twice, and frequency() clamps to 1).
  // Throws std::out_of_range for a bad layer or bundle number, before changing anything.
  void record(uint32_t layer, std::span<const int32_t> active);

  // The decayed token weight of the layer: sum of d^t over its recorded tokens (plus a seed's).
  double tokens(size_t layer) const;
  // The decayed number of tokens in which `bundle` fired (<= tokens(layer)).
  double count(size_t layer, uint32_t bundle) const;
  // (n_ff) count / tokens in [0, 1] per bundle; all 0 when the layer has no weight yet.
  // Throws std::invalid_argument when out.size() != n_ff(layer).
  void frequency(size_t layer, std::span<float> out) const;

  // Replaces the layer's statistics by a prior: `weight_tokens` tokens with these frequencies, e.g.
  // the pack's offline blk.N.neuron_freq (pack order) with a weight of about one half-life, so
  // that live traffic outweighs it after roughly a half-life. Throws std::invalid_argument (size,
  // a frequency NaN or outside [0, 1], a weight negative or not finite).
  void seed(size_t layer, std::span<const float> freq, double weight_tokens);

  // The layer's decayed counts (n_ff) and token weight, for saving; counts are clamped to the
  // token weight. restore() sets them back (counts finite, >= 0 and not above tokens, within
  // rounding) or throws std::invalid_argument naming the bundle.
  double snapshot(size_t layer, std::span<double> counts) const;
  void restore(size_t layer, std::span<const double> counts, double tokens);

 private:
  struct Layer {
    uint32_t n_ff = 0;
    uint64_t offset = 0;  // of bundle 0 in counts_
    double growth = 1.0;  // g: stored values are true values times g
    double stored_tokens = 0.0;
  };

  Layer& layer_at(size_t layer, const char* op);
  const Layer& layer_at(size_t layer, const char* op) const;
  void renormalize(Layer& l);

  std::vector<Layer> layers_;
  std::vector<double> counts_;  // per (layer, bundle), stored (times g)
  double half_life_ = kDefaultHalfLifeTokens;
  double step_ = 1.0;  // 1 / d = 2^(1 / half_life): g's factor per token
};

}  // namespace ember::cache
