#pragma once
// The FFN of one token computed only for a given set of neurons:
//   out = sum over active i (in list order) of act(gate_i . x, up_i . x) * down_rows[i]
// Gate and up rows are read from the weights' original layout (MatrixView::data, never the
// repacked copy, whose panels interleave rows); down_rows holds one row per neuron
// (core/sparse/neuron_rows.h). A listed neuron whose activation turns out 0 adds nothing; for
// ReLU-family activations its up row is not even read when its gate is <= 0.
//
// Threads: phase 1 splits the active neurons into chunks (gate/up dot products -> h), phase 2
// splits the output dims into block-aligned strips, each accumulating every active neuron's
// slice in list order. No partial sums to reduce, and the summation order of every output is fixed,
// so results do not depend on the number of threads or on scheduling.
#include <cstdint>
#include <vector>

#include "core/kernels/matmul.h"
#include "core/kernels/thread_pool.h"
#include "core/sparse/ffn_activation.h"

namespace ember {

struct SparseFfnArgs {
  MatrixView gate;                    // (n_embd -> n_ff): row i = neuron i
  MatrixView up;                      // (n_embd -> n_ff)
  MatrixView down_rows;               // n_ff rows of n_embd: row i = neuron i's down column
  FfnActivation act = FfnActivation::SiLU;
  const float* x = nullptr;           // the normed input (n_embd)
  const int32_t* active = nullptr;    // neuron ids, each in [0, n_ff); ascending by convention
  int64_t n_active = 0;
  const float* gate_values = nullptr; // optional: every neuron's gate . x, already computed (n_ff)
  float* out = nullptr;               // (n_embd), overwritten
};

// Buffers sized once per context (no allocation per token).
struct SparseFfnScratch {
  void reserve(int64_t n_embd, int64_t n_ff, int n_threads);
  std::vector<uint8_t> x_gate, x_up;  // x converted to the gate's / up's vec_dot type
  std::vector<float> h;               // (n_ff) activation of the k-th listed neuron
  std::vector<float> strips;          // (threads, n_embd) down slices converted to float
  int64_t strip_floats = 0;
};

// Returns how many listed neurons had a non-zero activation. PRECONDITIONS: shapes agree
// (gate/up: n_embd cols, down_rows: n_embd cols, n_ff rows), types have kernel traits, scratch
// reserved for these sizes and pool.size() threads.
int64_t sparse_ffn(const SparseFfnArgs& a, ThreadPool& pool, SparseFfnScratch& scratch);

// The reference: one thread, the scalar kernels, whole down rows dequantized. Tests compare
// sparse_ffn() against it.
int64_t sparse_ffn_reference(const SparseFfnArgs& a);

}  // namespace ember
