#pragma once
// A mixture-of-experts pack under a memory budget. Each expert of each layer is one unit of the
// model's neuron cache (core/cache/offloaded_ffn.h; unit = layer * n_expert + expert), so one cache
// serves all experts of all layers, its hot set chosen across them by joint activation frequency
// (expert popularity x neuron frequency, from the pack).
//
// OffloadedMoeFfn (prompt batches, dense decode): tokens grouped by expert; each routed expert's
// bundles are streamed past the cache once for all of its tokens, so a prompt reads each used
// expert's weights once per layer, and an expert no token chose is not read.
// OffloadedSparseMoeFfn (decode): route the token, then for each of its k experts its predictor
// and only the predicted bundles, through the cache; with prefetch on, every routed expert's
// predicted bundles are read during the attention, in one batch (routed and predicted from the
// residual entering the layer).
#include <cstdint>
#include <span>
#include <vector>

#include "core/cache/offloaded_ffn.h"
#include "core/model/expert_batches.h"
#include "core/model/moe_steps.h"
#include "core/sparse/sparse_bundle_ffn.h"

namespace ember {

class OffloadedMoeFfn : public FfnStrategy {
 public:
  OffloadedMoeFfn(const FfnEnv& env, OffloadedFfn& offload, MoeRouteObserver* observer);
  void run(int64_t layer, const FfnIo& io, FfnStepReport& report) override;
  uint64_t scratch_bytes() const override { return batches_.bytes(); }

 private:
  FfnEnv env_;
  OffloadedFfn& offload_;
  MoeRouteObserver* observer_;
  ExpertBatches batches_;
};

class OffloadedSparseMoeFfn : public FfnStrategy {
 public:
  // thresholds: the context's per-layer predictor thresholds (outlive this).
  OffloadedSparseMoeFfn(const FfnEnv& env, OffloadedFfn& offload, std::span<const float> thresholds,
                        MoeRouteObserver* observer);
  void prefetch(int64_t layer, const float* residual, FfnStepReport& report) override;
  void run(int64_t layer, const FfnIo& io, FfnStepReport& report) override;  // one token
  uint64_t scratch_bytes() const override;

 private:
  int64_t predict(int64_t layer, const ExpertWeights& ex, const float* residual, int32_t* ids);

  FfnEnv env_;
  OffloadedFfn& offload_;
  std::span<const float> thresholds_;
  MoeRouteObserver* observer_;
  SparseBundleFfn kernel_;             // this context's: runs on the bundles the cache hands out
  TokenMixture mixture_;
  std::vector<int32_t> active_;        // (n_ff)
  std::vector<float> hidden_, scores_; // predictor: (max rank), (n_ff)
  std::vector<float> normed_;          // (n_embd) prefetch: the residual through ffn_norm
  std::vector<int32_t> predicted_;     // (k * n_ff) prefetch: each routed expert's predicted ids
  std::vector<OffloadedFfn::Predicted> lists_;  // (k) prefetch: the units and their lists
};

}  // namespace ember
