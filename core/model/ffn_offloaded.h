#pragma once
// The FFN of a pack under a memory budget: the bundles come from storage through the model's
// neuron cache (core/cache/offloaded_ffn.h), which every context of the model shares.
//
// OffloadedDenseFfn streams a layer's bundles (prompt batches, dense decode). OffloadedSparseFfn
// runs the predictor and computes the listed bundles as the cache hands them out;
// PrefetchingSparseFfn also predicts each layer before its attention and starts reading the
// predicted misses then (OffloadOptions::prefetch).
#include <vector>

#include "core/cache/offloaded_ffn.h"
#include "core/model/ffn_selectors.h"
#include "core/model/ffn_strategy.h"
#include "core/sparse/sparse_bundle_ffn.h"

namespace ember {

class OffloadedDenseFfn : public FfnStrategy {
 public:
  OffloadedDenseFfn(const FfnEnv& env, OffloadedFfn& offload) : env_(env), offload_(offload) {}
  void run(int64_t layer, const FfnIo& io, FfnStepReport& report) override;

 private:
  FfnEnv env_;
  OffloadedFfn& offload_;
};

class OffloadedSparseFfn : public FfnStrategy {
 public:
  // thresholds: the context's per-layer predictor thresholds; dense: the full-list fallback.
  OffloadedSparseFfn(const FfnEnv& env, OffloadedFfn& offload, std::span<const float> thresholds,
                     OffloadedDenseFfn& dense);
  void run(int64_t layer, const FfnIo& io, FfnStepReport& report) override;  // one token
  uint64_t scratch_bytes() const override;

 protected:
  FfnEnv env_;
  OffloadedFfn& offload_;
  PredictorSelector predictor_;
  OffloadedDenseFfn& dense_;
  SparseBundleFfn kernel_;       // this context's: runs on the bundles the cache hands out
  std::vector<int32_t> active_;  // (n_ff)
};

class PrefetchingSparseFfn : public OffloadedSparseFfn {
 public:
  using OffloadedSparseFfn::OffloadedSparseFfn;
  // The residual entering the layer stands in for the one entering its FFN (attention changes it
  // little): the predicted bundles are read while the attention runs.
  void prefetch(int64_t layer, const float* residual, FfnStepReport& report) override;
};

}  // namespace ember
