#include "core/model/ffn_dense.h"

#include "core/sparse/ffn_activation.h"
#include "core/sparse/neuron_rows_matmul.h"

namespace ember {

void DenseFfn::gate_up(int64_t layer, const FfnIo& io) {
  const LayerWeights& L = env_.w.layers[static_cast<size_t>(layer)];
  ffn_matmul(env_, L.ffn_gate, io.x, io.n, env_.gate.data());
  ffn_matmul(env_, L.ffn_up, io.x, io.n, env_.up.data());
}

void DenseFfn::activate_down(int64_t layer, const FfnIo& io) {
  const LayerWeights& L = env_.w.layers[static_cast<size_t>(layer)];
  const int64_t E = env_.c.n_embd, F = env_.c.n_ff;
  float* gate = env_.gate.data();
  const float* up = env_.up.data();
  const FfnActivation act = env_.c.activation;
  auto activate = [&](int64_t t, int) { ffn_activation(gate + t * F, up + t * F, F, act); };
  if (io.n == 1) activate(0, 0);
  else env_.pool.parallel_for(io.n, activate);
  if (L.ffn_down.data != nullptr) {
    ffn_matmul(env_, L.ffn_down, gate, io.n, io.out);
  } else {  // a pack: the down columns live in the bundles (ModelWeights::is_pack)
    neuron_rows_matmul(L.ffn_down_t, gate, io.n, F, io.out, E, env_.pool);
  }
}

void DenseFfn::run(int64_t layer, const FfnIo& io, FfnStepReport& report) {
  gate_up(layer, io);
  activate_down(layer, io);
  report.n_active = env_.c.n_ff;
  report.h = env_.gate.data();
}

}  // namespace ember
