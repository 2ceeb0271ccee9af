#pragma once
// Which neurons a sparse decode step computes (core/sparse/README.md, "Modes"). One selector per
// sparse mode, chosen when the context is set up; each writes the ids of token 0's active neurons.
#include <cstdint>
#include <span>
#include <vector>

#include "core/model/ffn_strategy.h"

namespace ember {

struct Selection {
  int64_t n_active = 0;
  // The env's gate (up) row 0 holds the dense gate (up) of token 0, computed to select: the
  // full-list fallback reuses it, and the threshold mode hands the gate values to the kernel.
  bool dense_gate = false, dense_up = false;
  // The sparse kernel takes the active neurons' gate values from that row instead of computing
  // them again (threshold mode; the oracle recomputes them, to test the kernel's own path).
  bool gate_values = false;
};

class ActiveSelector {
 public:
  virtual ~ActiveSelector() = default;
  virtual Selection select(int64_t layer, const FfnIo& io, int32_t* active) = 0;
  virtual uint64_t scratch_bytes() const { return 0; }
};

// The exact active set of a ReLU-family model from the dense gate (and up for dReLU): for checking.
class OracleSelector : public ActiveSelector {
 public:
  explicit OracleSelector(const FfnEnv& env) : env_(env) {}
  Selection select(int64_t layer, const FfnIo& io, int32_t* active) override;

 private:
  FfnEnv env_;
};

// PowerInfer's predictor fc2 . relu(fc1 . residual): neurons scoring above the layer's threshold.
class PredictorSelector : public ActiveSelector {
 public:
  // thresholds: one per layer, the context's (outlives this).
  PredictorSelector(const FfnEnv& env, std::span<const float> thresholds);
  Selection select(int64_t layer, const FfnIo& io, int32_t* active) override;
  // The prediction from any residual row (the one entering the layer, for a prefetch).
  int64_t predict(int64_t layer, const float* residual, int32_t* active);
  uint64_t scratch_bytes() const override;

 private:
  FfnEnv env_;
  std::span<const float> thresholds_;
  std::vector<float> hidden_;  // (max predictor rank)
  std::vector<float> scores_;  // (n_ff)
};

// Training-free (CATS): |act(gate)| above the layer's threshold, or above the per-token quantile
// for a target sparsity when the layer has no threshold.
class ThresholdSelector : public ActiveSelector {
 public:
  // thresholds: the context's; quantile: use target_sparsity's per-token quantile instead.
  ThresholdSelector(const FfnEnv& env, std::span<const float> thresholds, bool quantile, float target_sparsity);
  Selection select(int64_t layer, const FfnIo& io, int32_t* active) override;
  uint64_t scratch_bytes() const override { return scores_.size() * sizeof(float); }

 private:
  FfnEnv env_;
  std::span<const float> thresholds_;
  bool quantile_;
  float target_sparsity_;
  std::vector<float> scores_;  // (n_ff) quantile scratch
};

}  // namespace ember
