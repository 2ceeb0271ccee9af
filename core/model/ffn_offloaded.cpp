#include "core/model/ffn_offloaded.h"

#include "core/util/clock.h"

namespace ember {

void OffloadedDenseFfn::run(int64_t layer, const FfnIo& io, FfnStepReport& report) {
  offload_.dense_step(layer, io.x, io.n, env_.gate.data(), env_.up.data(), io.out, env_.pool, env_.mm);
  report.n_active = env_.c.n_ff;
}

OffloadedSparseFfn::OffloadedSparseFfn(const FfnEnv& env, OffloadedFfn& offload, std::span<const float> thresholds,
                                       OffloadedDenseFfn& dense)
    : env_(env),
      offload_(offload),
      predictor_(env, thresholds),
      dense_(dense),
      active_(static_cast<size_t>(env.c.n_ff), 0) {
  kernel_.reserve(offload.layout(), env.c.n_ff, env.pool.size());
}

uint64_t OffloadedSparseFfn::scratch_bytes() const {
  return active_.size() * sizeof(int32_t) + predictor_.scratch_bytes() + kernel_.bytes();
}

void OffloadedSparseFfn::run(int64_t layer, const FfnIo& io, FfnStepReport& report) {
  const uint64_t t0 = now_ns();
  const int64_t n = predictor_.select(layer, io, active_.data()).n_active;
  report.select_ns += now_ns() - t0;
  report.n_active = n;
  report.active = active_.data();
  if (n == env_.c.n_ff) {
    dense_.run(layer, io, report);  // every neuron: the streamed dense step
    return;
  }
  offload_.sparse_step(layer, io.x, active_.data(), n, env_.pool, kernel_, io.out);
}

void PrefetchingSparseFfn::prefetch(int64_t layer, const float* residual, FfnStepReport& report) {
  // active_ is free until the step's own prediction (the fetcher keeps its own copy of the list).
  const uint64_t t0 = now_ns();
  const int64_t n = predictor_.predict(layer, residual, active_.data());
  if (n < env_.c.n_ff) offload_.prefetch(layer, active_.data(), n);  // a dense step streams the layer anyway
  report.prefetch_ns += now_ns() - t0;
}

}  // namespace ember
