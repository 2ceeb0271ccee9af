#include "core/model/ffn_moe_offloaded.h"

#include <algorithm>

#include "core/model/moe_router.h"
#include "core/model/ops.h"
#include "core/util/clock.h"

namespace ember {

OffloadedMoeFfn::OffloadedMoeFfn(const FfnEnv& env, OffloadedFfn& offload, MoeRouteObserver* observer)
    : env_(env), offload_(offload), observer_(observer), batches_(env) {}

void OffloadedMoeFfn::run(int64_t layer, const FfnIo& io, FfnStepReport& report) {
  const int64_t E = env_.c.n_embd;
  batches_.route(layer, io.x, io.n, observer_);
  std::fill(io.out, io.out + io.n * E, 0.0f);
  for (int64_t e = 0; e < env_.c.n_expert; ++e) {
    const int64_t m = batches_.tokens_of(e);
    if (m == 0) continue;
    const float* xe = batches_.gather(e, io.x, E);
    offload_.dense_step(layer * env_.c.n_expert + e, xe, m, env_.gate.data(), env_.up.data(), batches_.outputs(),
                        env_.pool, env_.mm);
    batches_.scatter_add(e, io.out);
  }
  report.n_active = env_.c.n_ff * env_.c.n_expert_used;
}

OffloadedSparseMoeFfn::OffloadedSparseMoeFfn(const FfnEnv& env, OffloadedFfn& offload,
                                             std::span<const float> thresholds, MoeRouteObserver* observer)
    : env_(env),
      offload_(offload),
      thresholds_(thresholds),
      observer_(observer),
      mixture_(env.c),
      active_(static_cast<size_t>(env.c.n_ff), 0),
      hidden_(static_cast<size_t>(std::max<int64_t>(1, env.w.max_predictor_rank())), 0.0f),
      scores_(static_cast<size_t>(env.c.n_ff), 0.0f),
      normed_(static_cast<size_t>(env.c.n_embd), 0.0f),
      predicted_(offload.prefetch_enabled() ? static_cast<size_t>(env.c.n_expert_used * env.c.n_ff) : 0, 0),
      lists_(static_cast<size_t>(env.c.n_expert_used)) {
  kernel_.reserve(offload.layout(), env.c.n_ff, env.pool.size());
}

uint64_t OffloadedSparseMoeFfn::scratch_bytes() const {
  return (hidden_.size() + scores_.size() + normed_.size()) * sizeof(float) +
         (active_.size() + predicted_.size()) * sizeof(int32_t) + lists_.size() * sizeof(OffloadedFfn::Predicted) +
         kernel_.bytes() + mixture_.bytes();
}

// The expert's predicted bundles (the pack's predictor rows follow its bundles: ids are bundle numbers).
int64_t OffloadedSparseMoeFfn::predict(int64_t layer, const ExpertWeights& ex, const float* residual, int32_t* ids) {
  return predict_expert(env_, ex, residual, thresholds_[static_cast<size_t>(layer)], hidden_.data(), scores_.data(),
                        ids);
}

void OffloadedSparseMoeFfn::prefetch(int64_t layer, const float* residual, FfnStepReport& report) {
  if (!offload_.prefetch_enabled()) return;
  // The residual entering the layer stands in for the one entering its FFN (attention changes it
  // little): routed through ffn_norm like the real input, every routed expert's predicted bundles
  // are read in one batch while the attention runs (neighbouring experts' reads coalesce). An
  // expert predicted dense is left out: its step streams the whole expert anyway.
  const uint64_t t0 = now_ns();
  const LayerWeights& L = env_.w.layers[static_cast<size_t>(layer)];
  rms_norm(residual, L.ffn_norm, normed_.data(), env_.c.n_embd, env_.c.rms_eps);
  mixture_.route(env_, layer, normed_.data(), nullptr);
  size_t n_lists = 0;
  for (const int32_t e : mixture_.chosen()) {
    int32_t* ids = predicted_.data() + n_lists * static_cast<size_t>(env_.c.n_ff);
    const int64_t n = predict(layer, L.experts[static_cast<size_t>(e)], residual, ids);
    if (n < env_.c.n_ff) lists_[n_lists++] = OffloadedFfn::Predicted{layer * env_.c.n_expert + e, ids, n};
  }
  offload_.prefetch(std::span<const OffloadedFfn::Predicted>(lists_.data(), n_lists));
  report.prefetch_ns += now_ns() - t0;
}

void OffloadedSparseMoeFfn::run(int64_t layer, const FfnIo& io, FfnStepReport& report) {
  const LayerWeights& L = env_.w.layers[static_cast<size_t>(layer)];
  mixture_.mix(env_, layer, io.x, observer_, io.out, report, [&](int32_t e, float* expert_out) {
    const int64_t unit = layer * env_.c.n_expert + e;
    const uint64_t s0 = now_ns();
    const int64_t n = predict(layer, L.experts[static_cast<size_t>(e)], io.residual, active_.data());
    report.select_ns += now_ns() - s0;
    if (n == env_.c.n_ff) {  // every neuron: the streamed dense step of this expert
      offload_.dense_step(unit, io.x, 1, env_.gate.data(), env_.up.data(), expert_out, env_.pool, env_.mm);
    } else {
      offload_.sparse_step(unit, io.x, active_.data(), n, env_.pool, kernel_, expert_out);
    }
    return n;
  });
}

}  // namespace ember
