#include "core/model/ffn_observed.h"

namespace ember {

void ObservedFfn::run(int64_t layer, const FfnIo& io, FfnStepReport& report) {
  dense_.gate_up(layer, io);
  FfnObservation obs;
  obs.layer = layer;
  obs.n_tokens = io.n;
  obs.n_embd = env_.c.n_embd;
  obs.n_ff = env_.c.n_ff;
  obs.residual = io.residual;
  obs.gate = env_.gate.data();
  obs.up = env_.up.data();
  observer_.observe(obs, env_.pool);
  dense_.activate_down(layer, io);
  report.n_active = env_.c.n_ff;
  report.h = env_.gate.data();
}

}  // namespace ember
