#pragma once
// The dense FFN with every weight in memory: gate and up matmuls, the activation, the down
// projection. Prompt batches always run it (unless the model is under a memory budget), and so do
// decode steps without a sparse mode.
#include "core/model/ffn_strategy.h"

namespace ember {

class DenseFfn : public FfnStrategy {
 public:
  explicit DenseFfn(const FfnEnv& env) : env_(env) {}
  void run(int64_t layer, const FfnIo& io, FfnStepReport& report) override;

  // The halves of run(), for a decorator that looks at the gate and up values between them
  // (ObservedFfn), and the full-list fallback of the sparse FFN. gate_up fills the env's gate/up
  // rows [0, io.n); activate_down turns them into h and writes io.out.
  void gate_up(int64_t layer, const FfnIo& io);
  void activate_down(int64_t layer, const FfnIo& io);

 private:
  FfnEnv env_;
};

}  // namespace ember
