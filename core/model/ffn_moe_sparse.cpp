#include "core/model/ffn_moe_sparse.h"

#include <algorithm>

#include "core/sparse/active_set.h"
#include "core/util/clock.h"

namespace ember {

SparseMoeFfn::SparseMoeFfn(const FfnEnv& env, SparseOptions::Mode mode, std::span<const float> thresholds,
                           std::span<SparseLayerStats> audit, MoeRouteObserver* observer)
    : env_(env),
      mode_(mode),
      thresholds_(thresholds),
      audit_(audit),
      observer_(observer),
      mixture_(env.c),
      active_(static_cast<size_t>(env.c.n_ff), 0),
      hidden_(static_cast<size_t>(std::max<int64_t>(1, env.w.max_predictor_rank())), 0.0f),
      scores_(static_cast<size_t>(env.c.n_ff), 0.0f) {
  scratch_.reserve(env.c.n_embd, env.c.n_ff, env.pool.size());
}

uint64_t SparseMoeFfn::scratch_bytes() const {
  return (hidden_.size() + scores_.size()) * sizeof(float) + active_.size() * sizeof(int32_t) + scratch_.bytes() +
         mixture_.bytes();
}

int64_t SparseMoeFfn::select(int64_t layer, const ExpertWeights& ex, const FfnIo& io) {
  if (mode_ == SparseOptions::Mode::Predictor) {
    return predict_expert(env_, ex, io.residual, thresholds_[static_cast<size_t>(layer)], hidden_.data(),
                          scores_.data(), active_.data());
  }
  // Oracle: the exact active set from the expert's dense gate (and up, for dReLU).
  ffn_matmul(env_, ex.gate, io.x, 1, env_.gate.data());
  if (env_.c.activation == FfnActivation::DReLU) ffn_matmul(env_, ex.up, io.x, 1, env_.up.data());
  return select_relu_active(env_.gate.data(), env_.up.data(), env_.c.n_ff, env_.c.activation, active_.data());
}

// Diagnostics: the expert's true activations, computed densely into the env's gate row, against
// the computed list (active_).
void SparseMoeFfn::count_truth(int64_t layer, const ExpertWeights& ex, const FfnIo& io, int64_t n_active,
                               FfnStepReport& report) {
  const uint64_t t0 = now_ns();
  const int64_t F = env_.c.n_ff;
  float* h = env_.gate.data();
  ffn_matmul(env_, ex.gate, io.x, 1, h);
  ffn_matmul(env_, ex.up, io.x, 1, env_.up.data());
  ffn_activation(h, env_.up.data(), F, env_.c.activation);
  SparseLayerStats& st = audit_[static_cast<size_t>(layer)];
  st.truly_active += static_cast<uint64_t>(count_nonzero(h, F));
  st.true_positive += static_cast<uint64_t>(count_nonzero_at(h, active_.data(), n_active));
  report.audit_ns += now_ns() - t0;
}

void SparseMoeFfn::run(int64_t layer, const FfnIo& io, FfnStepReport& report) {
  const LayerWeights& L = env_.w.layers[static_cast<size_t>(layer)];
  mixture_.mix(env_, layer, io.x, observer_, io.out, report, [&](int32_t e, float* expert_out) {
    const ExpertWeights& ex = L.experts[static_cast<size_t>(e)];
    const uint64_t s0 = now_ns();
    const int64_t n_active = select(layer, ex, io);
    report.select_ns += now_ns() - s0;
    SparseFfnArgs a;
    a.gate = ex.gate;
    a.up = ex.up;
    a.down_rows = ex.down_t;
    a.act = env_.c.activation;
    a.x = io.x;
    a.active = active_.data();
    a.n_active = n_active;
    a.out = expert_out;
    sparse_ffn(a, env_.pool, scratch_);
    if (!audit_.empty()) count_truth(layer, ex, io, n_active, report);
    return n_active;
  });
}

}  // namespace ember
