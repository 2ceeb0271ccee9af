#pragma once
// PowerInfer's activation predictor: a rank-r MLP per layer, scores = fc2 . relu(fc1 . x), where x
// is the residual stream before ffn_norm. Neuron i is predicted active when scores[i] > threshold.
#include <cstdint>

#include "core/kernels/matmul.h"
#include "core/kernels/thread_pool.h"

namespace ember {

struct PredictorArgs {
  MatrixView fc1;                // (n_embd -> r)
  MatrixView fc2;                // (r -> n_ff)
  const float* x = nullptr;      // (n_embd) residual stream
  float threshold = 0.0f;
  float* hidden = nullptr;       // (r) scratch
  float* scores = nullptr;       // (n_ff) scratch; holds the scores afterwards
  int32_t* active = nullptr;     // (n_ff) out: predicted neuron ids, ascending
};

// Returns the number of predicted neurons. scratch must be reserved for n_embd and r columns.
int64_t predict_active_neurons(const PredictorArgs& a, ThreadPool& pool, MatmulScratch& scratch);

}  // namespace ember
