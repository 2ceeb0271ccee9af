#pragma once
// The FFN of one token computed only for a given set of neurons:
//   out = sum over active i (in list order) of act(gate_i . x, up_i . x) * down_rows[i]
// Gate and up rows are read from the weights' original layout (MatrixView::data, never the
// repacked copy, whose panels interleave rows); down_rows holds one row per neuron
// (core/sparse/neuron_rows.h). A listed neuron whose activation turns out 0 adds nothing; for
// ReLU-family activations its up row is not even read when its gate is <= 0.
//
// Threads: the active list is cut into at most 8 contiguous chunks (a count that does not depend on
// the threads); each chunk computes its neurons one by one (gate dot, up dot, activation, then the
// down row added into the chunk's partial output) and the partials are added in chunk order. Each
// neuron is one pass over its rows (in a pack, over one contiguous bundle) while the rows of the
// neurons ahead are prefetched. The summation order of every output is fixed, so results do not
// depend on the number of threads or on scheduling.
#include <cstdint>
#include <vector>

#include "core/kernels/matmul.h"
#include "core/kernels/thread_pool.h"
#include "core/sparse/ffn_activation.h"
#include "core/sparse/q4_0_prepared_dot.h"

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
  uint64_t bytes() const;  // all buffers together
  std::vector<uint8_t> x_gate, x_up;  // x converted to the gate's / up's vec_dot type
  Q4PreparedInput x_q4;              // x prepared for Q4_0 rows
  std::vector<float> h;               // (n_ff) activation of the k-th listed neuron
  std::vector<float> tmp;             // (threads, row_floats) a down row converted to float
  std::vector<float> partials;        // (chunks, row_floats) each chunk's partial output
  int64_t row_floats = 0;
};

// Returns how many listed neurons had a non-zero activation. PRECONDITIONS: shapes agree
// (gate/up: n_embd cols, down_rows: n_embd cols, n_ff rows), types have kernel traits, scratch
// reserved for these sizes and pool.size() threads.
int64_t sparse_ffn(const SparseFfnArgs& a, ThreadPool& pool, SparseFfnScratch& scratch);

// The reference: one thread, the scalar kernels, whole down rows dequantized. Tests compare
// sparse_ffn() against it.
int64_t sparse_ffn_reference(const SparseFfnArgs& a);

}  // namespace ember
