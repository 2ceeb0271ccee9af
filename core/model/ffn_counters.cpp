#include "core/model/ffn_counters.h"

#include "core/sparse/active_set.h"
#include "core/sparse/ffn_activation.h"
#include "core/util/clock.h"

namespace ember {

void CountedFfn::prefetch(int64_t layer, const float* residual, FfnStepReport& report) {
  inner_.prefetch(layer, residual, report);
  layer_start_ns_ = now_ns();  // the attention's time starts after the prefetch's
}

void CountedFfn::run(int64_t layer, const FfnIo& io, FfnStepReport& report) {
  const uint64_t t0 = now_ns();
  inner_.run(layer, io, report);
  const uint64_t t1 = now_ns();
  SparseLayerStats& st = stats_[static_cast<size_t>(layer)];
  st.attention_ns += t0 - layer_start_ns_;
  st.tokens += 1;
  st.neurons += static_cast<uint64_t>(n_ff_);
  st.active += static_cast<uint64_t>(report.n_active);
  st.predictor_ns += report.prefetch_ns + report.select_ns;
  st.diagnostics_ns += report.audit_ns;
  st.ffn_ns += t1 - t0 - report.select_ns - report.audit_ns;
}

void AuditedFfn::run(int64_t layer, const FfnIo& io, FfnStepReport& report) {
  inner_.run(layer, io, report);
  SparseLayerStats& st = stats_[static_cast<size_t>(layer)];
  const int64_t F = env_.c.n_ff;
  if (report.active == nullptr) {
    // Every neuron was computed, and h with them: all of the truly active ones were found.
    const auto truly = static_cast<uint64_t>(count_nonzero(report.h, F));
    st.truly_active += truly;
    st.true_positive += truly;
    return;
  }
  // The true activations of token 0, computed densely into the env's gate row (the step is done
  // with it), only to count recall and precision.
  const uint64_t t0 = now_ns();
  const LayerWeights& L = env_.w.layers[static_cast<size_t>(layer)];
  float* h = env_.gate.data();
  ffn_matmul(env_, L.ffn_gate, io.x, 1, h);
  ffn_matmul(env_, L.ffn_up, io.x, 1, env_.up.data());
  ffn_activation(h, env_.up.data(), F, env_.c.activation);
  st.truly_active += static_cast<uint64_t>(count_nonzero(h, F));
  st.true_positive += static_cast<uint64_t>(count_nonzero_at(h, report.active, report.n_active));
  report.audit_ns += now_ns() - t0;
}

}  // namespace ember
