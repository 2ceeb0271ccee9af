#pragma once
// The sparse FFN's kernels, one entry per kernel set like the traits of type_traits.h: y += a * x
// over neuron rows (the down accumulation) and Q4_0 row dots against a prepared input (the gate
// and up rows). core/sparse wraps the active entry in plain functions (axpy.h,
// q4_0_prepared_dot.h); the contracts below are theirs.
#include <cstdint>

#include "core/kernels/q4_0_prepared_view.h"
#include "core/kernels/type_traits.h"

namespace ember {

struct SparseKernels {
  // y += a * x, multiply then add (never fused), so every set gives the same floats.
  void (*axpy_f32)(int64_t n, float a, const float* x, float* y);
  void (*axpy_f16)(int64_t n, float a, const uint16_t* x, float* y);
  // y += a * dequantize(x) over n_blocks blocks of 32 values: y = fma(q - 8, a * d, y) per value
  // (Q8_0: fma(q, a * d, y)), a * d rounded once per block; the same floats in every set.
  void (*axpy_q4_0)(int64_t n_blocks, float a, const void* x, float* y);
  void (*axpy_q8_0)(int64_t n_blocks, float a, const void* x, float* y);
  // axpy_q4_0(n_blocks, a[r], x[r], y) for r = 0 .. n-1 in that order, the same floats.
  void (*axpy_q4_0_rows)(int64_t n_blocks, const float* a, const void* const* x, int n, float* y);
  // sum over blocks of d_w * d_x * sum_j (q_j - 8) * x_j for one Q4_0 row of x.n_blocks blocks
  // (x: Q4PreparedInput::view(), q4_0_prepared_input.h).
  float (*dot_q4_0_prepared)(const void* row, const Q4PreparedView& x);
  // out[r] = dot_q4_0_prepared(rows[r], x) for r < n, bit for bit.
  void (*dot_q4_0_prepared_rows)(const void* const* rows, int n, const Q4PreparedView& x, float* out,
                                 RowsAhead ahead);
};

// The active kernel set's sparse kernels.
const SparseKernels& sparse_kernels();
// A given set's sparse kernels, or nullptr when this build or this CPU cannot run that set (tests
// run every set this way, whatever EMBER_KERNELS says).
const SparseKernels* sparse_kernels_for(KernelSet set);

}  // namespace ember
