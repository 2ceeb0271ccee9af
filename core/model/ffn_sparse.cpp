#include "core/model/ffn_sparse.h"

#include "core/util/clock.h"

namespace ember {

SparseFfn::SparseFfn(const FfnEnv& env, std::unique_ptr<ActiveSelector> selector, DenseFfn& dense)
    : env_(env), selector_(std::move(selector)), dense_(dense), active_(static_cast<size_t>(env.c.n_ff), 0) {
  for (int64_t l = 0; l < env.c.n_layer; ++l) down_rows_.push_back(env.w.neuron_down_rows(l));
  scratch_.reserve(env.c.n_embd, env.c.n_ff, env.pool.size());
}

uint64_t SparseFfn::scratch_bytes() const {
  return active_.size() * sizeof(int32_t) + scratch_.bytes() + selector_->scratch_bytes();
}

void SparseFfn::run(int64_t layer, const FfnIo& io, FfnStepReport& report) {
  const LayerWeights& L = env_.w.layers[static_cast<size_t>(layer)];
  const int64_t F = env_.c.n_ff;
  const uint64_t t0 = now_ns();
  const Selection s = selector_->select(layer, io, active_.data());
  report.select_ns += now_ns() - t0;
  report.n_active = s.n_active;
  report.active = active_.data();
  if (s.n_active == F) {
    // Nothing skipped: the dense kernels, so the result is the dense path's bit for bit.
    if (!s.dense_gate) ffn_matmul(env_, L.ffn_gate, io.x, 1, env_.gate.data());
    if (!s.dense_up) ffn_matmul(env_, L.ffn_up, io.x, 1, env_.up.data());
    dense_.activate_down(layer, io);
    return;
  }
  SparseFfnArgs a;
  a.gate = L.ffn_gate;
  a.up = L.ffn_up;
  a.down_rows = down_rows_[static_cast<size_t>(layer)];
  a.act = env_.c.activation;
  a.x = io.x;
  a.active = active_.data();
  a.n_active = s.n_active;
  a.gate_values = s.gate_values ? env_.gate.data() : nullptr;
  a.out = io.out;
  sparse_ffn(a, env_.pool, scratch_);
}

}  // namespace ember
