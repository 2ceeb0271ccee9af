#pragma once
// Collects an ActivationProfile from the dense FFN of an inference context (an FfnObserver):
// per neuron how often it fires, per layer the distribution of |act(gate)| (for CATS thresholds),
// token-to-token locality of the active set, and, when the model has a predictor, its recall and
// precision against the true active set. Sized once; observe() does not allocate.
#include <cstdint>
#include <vector>

#include "core/kernels/matmul.h"
#include "core/sparse/activation_profile.h"
#include "core/sparse/ffn_activation.h"
#include "core/sparse/ffn_observer.h"

namespace ember {

struct ProfilerSetup {
  FfnActivation act = FfnActivation::SiLU;
  int64_t n_layer = 0, n_embd = 0, n_ff = 0;
  int64_t max_tokens = 512;          // the most tokens one observation holds (the context's batch)
  std::vector<MatrixView> fc1, fc2;  // per layer, or empty: no predictor
  float predictor_threshold = 0.0f;
};

class ActivationProfiler : public FfnObserver {
 public:
  ActivationProfiler(ProfilerSetup setup, int n_threads);
  void observe(const FfnObservation& o, ThreadPool& pool) override;
  // The next observation does not continue the previous one (a new window of text): locality
  // does not compare across the break.
  void sequence_break();
  uint64_t tokens() const;  // tokens seen by layer 0
  uint64_t tokens(int64_t layer) const;  // tokens seen by this layer (a unit's: those routed to it)
  ActivationProfile result() const;

  // |act(gate)| histogram bins: 0 for exact zeros, then 64 bins per octave from 2^-30 to 2^17.
  static constexpr int kSubBins = 64, kMinExp = -30, kMaxExp = 17;
  static constexpr int kBins = 1 + (kMaxExp - kMinExp) * kSubBins;
  static int bin_of(float magnitude);
  static double bin_low(int bin);   // smallest magnitude of the bin
  static double bin_high(int bin);  // one past the largest
  // The value below which `q` of the histogram's mass lies (linear inside a bin).
  static float percentile(const std::vector<uint64_t>& hist, double q);

 private:
  struct LayerState {
    std::vector<uint64_t> count;  // (n_ff) tokens in which the neuron was active
    std::vector<uint8_t> prev;    // (n_ff) active in the previous token
    std::vector<uint64_t> hist;   // (kBins)
    uint64_t tokens = 0, active = 0, active_after_first = 0, repeated = 0;
    uint64_t predicted = 0, true_positive = 0;
    bool has_prev = false;
  };
  ProfilerSetup s_;
  std::vector<LayerState> layers_;
  // Scratch for one observation.
  std::vector<uint64_t> thread_hist_;  // (threads, kBins)
  std::vector<float> token_cut_;       // (max_tokens) SiLU: the token's median |silu(gate)|
  std::vector<float> magnitudes_;      // (threads, n_ff) for the medians
  std::vector<float> pred_hidden_, pred_scores_;
  std::vector<uint64_t> chunk_sums_;   // (chunks, 5)
  MatmulScratch mm_;
};

}  // namespace ember
