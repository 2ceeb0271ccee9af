#include "core/model/ffn_moe.h"

#include <cstring>

#include "core/sparse/ffn_activation.h"
#include "core/sparse/neuron_rows_matmul.h"

namespace ember {
namespace {

size_t sz(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

}  // namespace

MoeFfn::MoeFfn(const FfnEnv& env, MoeRouteObserver* observer, FfnObserver* neurons)
    : env_(env), observer_(observer), neurons_(neurons), batches_(env) {
  const auto max_tokens = static_cast<int64_t>(env.gate.size()) / env.c.n_ff;
  if (neurons_ != nullptr) re_.assign(sz(max_tokens, env.c.n_embd), 0.0f);
}

uint64_t MoeFfn::scratch_bytes() const { return batches_.bytes() + re_.size() * sizeof(float); }

void MoeFfn::run(int64_t layer, const FfnIo& io, FfnStepReport& report) {
  batches_.route(layer, io.x, io.n, observer_);
  std::memset(io.out, 0, sz(io.n, env_.c.n_embd) * sizeof(float));
  for (int64_t e = 0; e < env_.c.n_expert; ++e) {
    if (batches_.tokens_of(e) > 0) run_expert(layer, e, io);
  }
  report.n_active = env_.c.n_ff * env_.c.n_expert_used;
}

// The profiler's view of one expert: its tokens' residual rows (the predictor's input) and the
// gate/up rows just computed for them.
void MoeFfn::observe_expert(int64_t layer, int64_t expert, const FfnIo& io) {
  batches_.gather_into(expert, io.residual, env_.c.n_embd, re_.data());
  FfnObservation obs;
  obs.layer = layer * env_.c.n_expert + expert;
  obs.n_tokens = batches_.tokens_of(expert);
  obs.n_embd = env_.c.n_embd;
  obs.n_ff = env_.c.n_ff;
  obs.residual = re_.data();
  obs.gate = env_.gate.data();
  obs.up = env_.up.data();
  neurons_->observe(obs, env_.pool);
}

// Expert e over its tokens: their inputs gathered, one matmul per projection for all of them, and
// out[t] += weight * expert(x[t]) for each.
void MoeFfn::run_expert(int64_t layer, int64_t e, const FfnIo& io) {
  const ExpertWeights& ex = env_.w.layers[static_cast<size_t>(layer)].experts[static_cast<size_t>(e)];
  const int64_t E = env_.c.n_embd, F = env_.c.n_ff, m = batches_.tokens_of(e);
  const float* xe = batches_.gather(e, io.x, E);
  float* gate = env_.gate.data();
  ffn_matmul(env_, ex.gate, xe, m, gate);
  ffn_matmul(env_, ex.up, xe, m, env_.up.data());
  if (neurons_ != nullptr) observe_expert(layer, e, io);
  const FfnActivation act = env_.c.activation;
  auto activate = [&](int64_t i, int) { ffn_activation(gate + i * F, env_.up.data() + i * F, F, act); };
  if (m == 1) activate(0, 0);
  else env_.pool.parallel_for(m, activate);
  if (ex.down.data != nullptr) {
    ffn_matmul(env_, ex.down, gate, m, batches_.outputs());
  } else {  // a sparse file: the down projection exists only neuron-major
    neuron_rows_matmul(ex.down_t, gate, m, F, batches_.outputs(), E, env_.pool);
  }
  batches_.scatter_add(e, io.out);
}

}  // namespace ember
