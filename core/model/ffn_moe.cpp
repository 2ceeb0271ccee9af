#include "core/model/ffn_moe.h"

#include <algorithm>
#include <cstring>

#include "core/model/moe_router.h"
#include "core/sparse/ffn_activation.h"
#include "core/sparse/neuron_rows_matmul.h"
#include "core/sparse/predictor.h"

namespace ember {
namespace {

size_t sz(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

}  // namespace

MoeFfn::MoeFfn(const FfnEnv& env, MoeRouteObserver* observer, FfnObserver* neurons)
    : env_(env), observer_(observer), neurons_(neurons), max_tokens_(static_cast<int64_t>(env.gate.size()) / env.c.n_ff) {
  const int64_t k = env.c.n_expert_used;
  logits_.assign(sz(max_tokens_, env.c.n_expert), 0.0f);
  chosen_.assign(sz(max_tokens_, k), 0);
  weights_.assign(sz(max_tokens_, k), 0.0f);
  first_.assign(static_cast<size_t>(env.c.n_expert) + 1, 0);
  by_expert_.assign(sz(max_tokens_, k), 0);
  xe_.assign(sz(max_tokens_, env.c.n_embd), 0.0f);
  ye_.assign(sz(max_tokens_, env.c.n_embd), 0.0f);
  if (neurons_ != nullptr) re_.assign(sz(max_tokens_, env.c.n_embd), 0.0f);
}

uint64_t MoeFfn::scratch_bytes() const {
  return (logits_.size() + weights_.size() + xe_.size() + ye_.size() + re_.size()) * sizeof(float) +
         (chosen_.size() + first_.size() + by_expert_.size()) * sizeof(int32_t);
}

void route_tokens(const FfnEnv& env, int64_t layer, const float* x, int64_t n, float* logits, int32_t* chosen,
                  float* weights, MoeRouteObserver* observer) {
  const int64_t n_expert = env.c.n_expert, k = env.c.n_expert_used;
  ffn_matmul(env, env.w.layers[static_cast<size_t>(layer)].ffn_gate_inp, x, n, logits);
  for (int64_t t = 0; t < n; ++t) route_token(logits + t * n_expert, n_expert, k, chosen + t * k, weights + t * k);
  if (observer != nullptr) observer->on_routed(layer, n, k, chosen, weights);
}

int64_t predict_expert(const FfnEnv& env, const ExpertWeights& ex, const float* residual, float threshold,
                       float* hidden, float* scores, int32_t* active) {
  PredictorArgs p;
  p.fc1 = ex.pred_fc1;
  p.fc2 = ex.pred_fc2;
  p.x = residual;
  p.threshold = threshold;
  p.hidden = hidden;
  p.scores = scores;
  p.active = active;
  return predict_active_neurons(p, env.pool, env.mm);
}

void MoeFfn::route(int64_t layer, const FfnIo& io) {
  const int64_t n_expert = env_.c.n_expert, k = env_.c.n_expert_used;
  route_tokens(env_, layer, io.x, io.n, logits_.data(), chosen_.data(), weights_.data(), observer_);
  // A counting sort of the slots by expert: each expert's tokens stay in ascending order.
  std::fill(first_.begin(), first_.end(), 0);
  for (int64_t s = 0; s < io.n * k; ++s) ++first_[static_cast<size_t>(chosen_[static_cast<size_t>(s)]) + 1];
  for (int64_t e = 0; e < n_expert; ++e) first_[static_cast<size_t>(e) + 1] += first_[static_cast<size_t>(e)];
  // Reuses the slots' own counters: fill position = first_[e] + how many of e were placed.
  for (int64_t s = 0; s < io.n * k; ++s) {
    const auto e = static_cast<size_t>(chosen_[static_cast<size_t>(s)]);
    by_expert_[static_cast<size_t>(first_[e]++)] = static_cast<int32_t>(s);
  }
  // first_[e] now holds the end of expert e's slots: shift back to get the starts.
  for (int64_t e = n_expert; e > 0; --e) first_[static_cast<size_t>(e)] = first_[static_cast<size_t>(e) - 1];
  first_[0] = 0;
}

void MoeFfn::run(int64_t layer, const FfnIo& io, FfnStepReport& report) {
  const int64_t E = env_.c.n_embd;
  route(layer, io);
  std::memset(io.out, 0, sz(io.n, E) * sizeof(float));
  for (int64_t e = 0; e < env_.c.n_expert; ++e) {
    const int64_t begin = first_[static_cast<size_t>(e)], end = first_[static_cast<size_t>(e) + 1];
    if (begin < end) run_expert(layer, e, io, begin, end);
  }
  report.n_active = env_.c.n_ff * env_.c.n_expert_used;
}

// The profiler's view of one expert: its m tokens' residual rows (the predictor's input) and the
// gate/up rows just computed for them.
void MoeFfn::observe_expert(int64_t layer, int64_t expert, const FfnIo& io, int64_t begin, int64_t m) {
  const int64_t E = env_.c.n_embd, k = env_.c.n_expert_used;
  for (int64_t i = 0; i < m; ++i) {
    const int64_t t = by_expert_[static_cast<size_t>(begin + i)] / k;
    std::memcpy(&re_[sz(i, E)], io.residual + t * E, sz(E, 1) * sizeof(float));
  }
  FfnObservation obs;
  obs.layer = layer * env_.c.n_expert + expert;
  obs.n_tokens = m;
  obs.n_embd = E;
  obs.n_ff = env_.c.n_ff;
  obs.residual = re_.data();
  obs.gate = env_.gate.data();
  obs.up = env_.up.data();
  neurons_->observe(obs, env_.pool);
}

// Expert e over the tokens of slots by_expert_[begin, end): gather their inputs, one matmul per
// projection for all of them, and out[t] += weight * expert(x[t]) for each.
void MoeFfn::run_expert(int64_t layer, int64_t e, const FfnIo& io, int64_t begin, int64_t end) {
  const ExpertWeights& ex = env_.w.layers[static_cast<size_t>(layer)].experts[static_cast<size_t>(e)];
  const int64_t E = env_.c.n_embd, F = env_.c.n_ff, k = env_.c.n_expert_used, m = end - begin;
  for (int64_t i = 0; i < m; ++i) {
    const int64_t t = by_expert_[static_cast<size_t>(begin + i)] / k;
    std::memcpy(&xe_[sz(i, E)], io.x + t * E, sz(E, 1) * sizeof(float));
  }
  float* gate = env_.gate.data();
  ffn_matmul(env_, ex.gate, xe_.data(), m, gate);
  ffn_matmul(env_, ex.up, xe_.data(), m, env_.up.data());
  if (neurons_ != nullptr) observe_expert(layer, e, io, begin, m);
  const FfnActivation act = env_.c.activation;
  auto activate = [&](int64_t i, int) { ffn_activation(gate + i * F, env_.up.data() + i * F, F, act); };
  if (m == 1) activate(0, 0);
  else env_.pool.parallel_for(m, activate);
  if (ex.down.data != nullptr) {
    ffn_matmul(env_, ex.down, gate, m, ye_.data());
  } else {  // a sparse file: the down projection exists only neuron-major
    neuron_rows_matmul(ex.down_t, gate, m, F, ye_.data(), E, env_.pool);
  }
  for (int64_t i = 0; i < m; ++i) {
    const int64_t slot = by_expert_[static_cast<size_t>(begin + i)];
    const float w = weights_[static_cast<size_t>(slot)];
    float* out = io.out + (slot / k) * E;
    const float* y = &ye_[sz(i, E)];
    for (int64_t d = 0; d < E; ++d) out[d] += w * y[d];
  }
}

}  // namespace ember
