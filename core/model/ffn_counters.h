#pragma once
// Decorators that count decode steps into per-layer SparseLayerStats (what `run`, `bench` and
// /metrics report), so the strategies themselves carry no counting flags.
//
// CountedFfn: tokens, neurons, active neurons and the time split (attention, predictor, FFN,
// diagnostics), from the strategy's FfnStepReport. AuditedFfn (--sparse-stats diagnostics): after
// the step, the true activations, computed densely, give recall and precision of the active list.
// Stacked as CountedFfn(AuditedFfn(strategy)) so the audit's time is split off the FFN's.
#include <span>

#include "core/model/ffn_strategy.h"
#include "core/sparse/sparse_stats.h"

namespace ember {

class CountedFfn : public FfnStrategy {
 public:
  // inner and stats (one per layer, the context's) outlive this.
  CountedFfn(FfnStrategy& inner, std::span<SparseLayerStats> stats, int64_t n_ff)
      : inner_(inner), stats_(stats), n_ff_(n_ff) {}
  void prefetch(int64_t layer, const float* residual, FfnStepReport& report) override;
  void run(int64_t layer, const FfnIo& io, FfnStepReport& report) override;

 private:
  FfnStrategy& inner_;
  std::span<SparseLayerStats> stats_;
  int64_t n_ff_;
  uint64_t layer_start_ns_ = 0;  // when the current layer's attention began
};

class AuditedFfn : public FfnStrategy {
 public:
  AuditedFfn(FfnStrategy& inner, std::span<SparseLayerStats> stats, const FfnEnv& env)
      : inner_(inner), stats_(stats), env_(env) {}
  void prefetch(int64_t layer, const float* residual, FfnStepReport& report) override {
    inner_.prefetch(layer, residual, report);
  }
  void run(int64_t layer, const FfnIo& io, FfnStepReport& report) override;

 private:
  FfnStrategy& inner_;
  std::span<SparseLayerStats> stats_;
  FfnEnv env_;
};

}  // namespace ember
