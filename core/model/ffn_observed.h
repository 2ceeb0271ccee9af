#pragma once
// The dense FFN with an FfnObserver (ember profile's ActivationProfiler) shown each layer's gate and
// up values before the activation. A decorator, so the plain dense FFN carries no observer check.
#include "core/model/ffn_dense.h"
#include "core/sparse/ffn_observer.h"

namespace ember {

class ObservedFfn : public FfnStrategy {
 public:
  // Neither is owned; both must outlive this.
  ObservedFfn(DenseFfn& dense, FfnObserver& observer, const FfnEnv& env) : dense_(dense), observer_(observer), env_(env) {}
  void run(int64_t layer, const FfnIo& io, FfnStepReport& report) override;

 private:
  DenseFfn& dense_;
  FfnObserver& observer_;
  FfnEnv env_;
};

}  // namespace ember
