#include "core/model/ffn_selectors.h"

#include <algorithm>

#include "core/sparse/active_set.h"
#include "core/sparse/predictor.h"

namespace ember {

Selection OracleSelector::select(int64_t layer, const FfnIo& io, int32_t* active) {
  // The sparse kernel recomputes the gate and up of the selected neurons itself, so this mode
  // tests the same gather path as the others.
  const LayerWeights& L = env_.w.layers[static_cast<size_t>(layer)];
  Selection s;
  ffn_matmul(env_, L.ffn_gate, io.x, 1, env_.gate.data());
  s.dense_gate = true;
  if (env_.c.activation == FfnActivation::DReLU) {
    ffn_matmul(env_, L.ffn_up, io.x, 1, env_.up.data());
    s.dense_up = true;
  }
  s.n_active = select_relu_active(env_.gate.data(), env_.up.data(), env_.c.n_ff, env_.c.activation, active);
  return s;
}

PredictorSelector::PredictorSelector(const FfnEnv& env, std::span<const float> thresholds)
    : env_(env),
      thresholds_(thresholds),
      hidden_(static_cast<size_t>(std::max<int64_t>(1, env.w.max_predictor_rank())), 0.0f),
      scores_(static_cast<size_t>(env.c.n_ff), 0.0f) {}

int64_t PredictorSelector::predict(int64_t layer, const float* residual, int32_t* active) {
  const LayerWeights& L = env_.w.layers[static_cast<size_t>(layer)];
  PredictorArgs p;
  p.fc1 = L.pred_fc1;
  p.fc2 = L.pred_fc2;
  p.x = residual;
  p.threshold = thresholds_[static_cast<size_t>(layer)];
  p.hidden = hidden_.data();
  p.scores = scores_.data();
  p.active = active;
  return predict_active_neurons(p, env_.pool, env_.mm);
}

Selection PredictorSelector::select(int64_t layer, const FfnIo& io, int32_t* active) {
  Selection s;
  s.n_active = predict(layer, io.residual, active);  // the residual before ffn_norm, as trained
  return s;
}

uint64_t PredictorSelector::scratch_bytes() const { return (hidden_.size() + scores_.size()) * sizeof(float); }

ThresholdSelector::ThresholdSelector(const FfnEnv& env, std::span<const float> thresholds, bool quantile,
                                     float target_sparsity)
    : env_(env),
      thresholds_(thresholds),
      quantile_(quantile),
      target_sparsity_(target_sparsity),
      scores_(quantile ? static_cast<size_t>(env.c.n_ff) : 0, 0.0f) {}

Selection ThresholdSelector::select(int64_t layer, const FfnIo& io, int32_t* active) {
  const LayerWeights& L = env_.w.layers[static_cast<size_t>(layer)];
  const int64_t F = env_.c.n_ff;
  float* gate = env_.gate.data();
  ffn_matmul(env_, L.ffn_gate, io.x, 1, gate);
  const float threshold = quantile_ ? gate_magnitude_quantile(gate, F, env_.c.activation, target_sparsity_, scores_.data())
                                    : thresholds_[static_cast<size_t>(layer)];
  Selection s;
  s.dense_gate = s.gate_values = true;
  s.n_active = select_by_gate_magnitude(gate, F, env_.c.activation, threshold, active);
  return s;
}

}  // namespace ember
