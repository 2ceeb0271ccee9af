#pragma once
// The sparse decode step of a mixture of experts with every weight in memory (TurboSparse-Mixtral,
// PowerInfer-2): route the token, then for each of its k experts only that expert's active
// neurons, found by its own predictor (or exactly, by the oracle, for checking), computed by the
// sparse gather kernel (core/sparse/sparse_ffn.h) and weighted by the expert's gate weight.
// The experts the token was not routed to cost nothing, not even their predictors.
#include <cstdint>
#include <span>
#include <vector>

#include "core/model/moe_steps.h"
#include "core/sparse/sparse_ffn.h"
#include "core/sparse/sparse_options.h"
#include "core/sparse/sparse_stats.h"

namespace ember {

class SparseMoeFfn : public FfnStrategy {
 public:
  // mode: Oracle or Predictor (thresholds: one per layer, the context's; they outlive this).
  // audit: non-empty when diagnostics are on; the routed experts' dense activations are then
  // computed too, to count recall and precision into it (per layer).
  SparseMoeFfn(const FfnEnv& env, SparseOptions::Mode mode, std::span<const float> thresholds,
               std::span<SparseLayerStats> audit, MoeRouteObserver* observer);
  void run(int64_t layer, const FfnIo& io, FfnStepReport& report) override;  // one token
  uint64_t scratch_bytes() const override;

 private:
  int64_t select(int64_t layer, const ExpertWeights& ex, const FfnIo& io);
  void count_truth(int64_t layer, const ExpertWeights& ex, const FfnIo& io, int64_t n_active, FfnStepReport& report);

  FfnEnv env_;
  SparseOptions::Mode mode_;
  std::span<const float> thresholds_;
  std::span<SparseLayerStats> audit_;
  MoeRouteObserver* observer_;
  TokenMixture mixture_;
  std::vector<int32_t> active_;      // (n_ff)
  std::vector<float> hidden_, scores_;  // predictor: (max rank), (n_ff)
  SparseFfnScratch scratch_;
};

}  // namespace ember
