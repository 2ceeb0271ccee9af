#pragma once
// How a layer's FFN is computed. InferenceContext picks its strategies once, when it is set up
// (ffn_setup.h): one for prompt batches, one for decode steps. The forward pass then calls
// prefetch() before each layer's attention and run() after it, with no further choice per step.
//
// Implementations: DenseFfn (ffn_dense.h), SparseFfn in RAM (ffn_sparse.h), the offloaded dense
// and sparse FFNs through the neuron cache (ffn_offloaded.h); decorators add the profiler's
// observer (ffn_observed.h) and the decode counters and diagnostics (ffn_counters.h). A mixture of
// experts fits the same interface: its run() routes each token to experts and runs their FFNs.
#include <cstdint>
#include <span>

#include "core/kernels/matmul.h"
#include "core/kernels/thread_pool.h"
#include "core/model/model_config.h"
#include "core/model/model_weights.h"

namespace ember {

// What every strategy of one context works with. The gate/up scratch is the context's (max_batch
// rows of n_ff): strategies use rows [0, n) during a step and keep nothing in it across steps.
struct FfnEnv {
  const ModelConfig& c;
  const ModelWeights& w;
  ThreadPool& pool;
  MatmulScratch& mm;
  std::span<float> gate, up;
};

// y (n rows of w.rows) = w . x (n rows of w.cols), on the env's pool and scratch.
inline void ffn_matmul(const FfnEnv& env, const MatrixView& w, const float* x, int64_t n, float* y) {
  matmul(w, x, n, w.cols, y, w.rows, env.pool, env.mm);
}

// One layer's FFN over n consecutive tokens.
struct FfnIo {
  const float* residual = nullptr;  // n rows of n_embd: the residual stream before ffn_norm
  const float* x = nullptr;         // n rows of n_embd: ffn_norm(residual), the FFN's input
  int64_t n = 0;
  float* out = nullptr;             // n rows of n_embd, overwritten with the FFN's output
};

// What one layer's step tells the decorators that count it (ffn_counters.h); a strategy fills what
// it knows. Lives on the forward pass's stack for one layer.
struct FfnStepReport {
  int64_t n_active = 0;             // neurons computed for token 0
  const int32_t* active = nullptr;  // their ids; null when every neuron was computed
  const float* h = nullptr;         // the activations of every neuron of token 0, when computed
  uint64_t prefetch_ns = 0;         // predicting before the attention (prefetch)
  uint64_t select_ns = 0;           // choosing the active neurons in run()
  uint64_t audit_ns = 0;            // diagnostics: the dense FFN computed alongside
};

class FfnStrategy {
 public:
  virtual ~FfnStrategy() = default;
  // Before layer `layer`'s attention; `residual` is the stream entering the layer (row 0). A
  // strategy that reads weights from storage starts the reads here, so they overlap the attention.
  virtual void prefetch(int64_t layer, const float* residual, FfnStepReport& report) {}
  // io.out = FFN(io.x). Throws cache::FetchError when weights on storage cannot be read.
  virtual void run(int64_t layer, const FfnIo& io, FfnStepReport& report) = 0;
  // Bytes of scratch it owns (the context's shared gate/up rows not counted).
  virtual uint64_t scratch_bytes() const { return 0; }
};

}  // namespace ember
