#pragma once
// The sparse FFN's kernels, one entry per kernel set like the traits of type_traits.h: y += a * x
// over neuron rows (the down accumulation) and Q4_0 row dots against a prepared input (the gate
// and up rows). core/sparse wraps the active entry in plain functions (axpy.h,
// q4_0_prepared_dot.h). Each set's namespace in kernel_impl.h declares its kernels with these
// function types, so every signature is written here once.
#include <cstdint>

#include "core/kernels/q4_0_prepared_view.h"
#include "core/kernels/type_traits.h"

namespace ember {

// y += a * x, multiply then add (never fused), so every set gives the same floats.
using AxpyF32Fn = void(int64_t n, float a, const float* x, float* y);
using AxpyF16Fn = void(int64_t n, float a, const uint16_t* x, float* y);
// y += a * dequantize(x) over n_blocks Q4_0 or Q8_0 blocks of 32 values: y = fma(q - 8, a * d, y)
// per value (Q8_0: fma(q, a * d, y)), a * d rounded once per block; the same floats in every set.
using AxpyBlocksFn = void(int64_t n_blocks, float a, const void* x, float* y);
// The Q4_0 one for rows r = 0 .. n-1 with factors a[r], in that order: the same floats, the rows
// read side by side where a set can.
using AxpyRowsFn = void(int64_t n_blocks, const float* a, const void* const* x, int n, float* y);
// sum over blocks of d_w * d_x * sum_j (q_j - 8) * x_j for one Q4_0 row of x.n_blocks blocks
// (x: Q4PreparedInput::view(), q4_0_prepared_input.h).
using PreparedDotFn = float(const void* row, const Q4PreparedView& x);
// out[r] = the set's PreparedDotFn of rows[r] for r < n, bit for bit; `ahead` never changes a result.
using PreparedDotRowsFn = void(const void* const* rows, int n, const Q4PreparedView& x, float* out, RowsAhead ahead);

struct SparseKernels {
  AxpyF32Fn* axpy_f32;
  AxpyF16Fn* axpy_f16;
  AxpyBlocksFn* axpy_q4_0;
  AxpyBlocksFn* axpy_q8_0;
  AxpyRowsFn* axpy_q4_0_rows;
  PreparedDotFn* dot_q4_0_prepared;
  PreparedDotRowsFn* dot_q4_0_prepared_rows;
};

// The active kernel set's sparse kernels.
const SparseKernels& sparse_kernels();
// A given set's sparse kernels, or nullptr when this build or this CPU cannot run that set (tests
// run every set this way, whatever EMBER_KERNELS says).
const SparseKernels* sparse_kernels_for(KernelSet set);

}  // namespace ember
