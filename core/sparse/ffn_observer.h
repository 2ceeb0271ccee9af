#pragma once
// A hook into the dense FFN of an inference context: after the gate and up matmuls of each layer,
// before the activation. `ember profile` uses it to count which neurons fire.
#include <cstdint>

#include "core/kernels/thread_pool.h"

namespace ember {

struct FfnObservation {
  int64_t layer = 0;
  int64_t n_tokens = 0;            // consecutive positions of one sequence, in order
  int64_t n_embd = 0, n_ff = 0;
  const float* residual = nullptr; // (n_tokens, n_embd) residual stream before ffn_norm (predictor input)
  const float* gate = nullptr;     // (n_tokens, n_ff) gate . ffn_norm(x), before the activation
  const float* up = nullptr;       // (n_tokens, n_ff) up . ffn_norm(x)
};

class FfnObserver {
 public:
  virtual ~FfnObserver() = default;
  // Called from the context's thread; may use the pool (it is idle during the call).
  virtual void observe(const FfnObservation& o, ThreadPool& pool) = 0;
};

}  // namespace ember
