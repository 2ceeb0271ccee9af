#pragma once
// Dot products of many Q4_0 rows with one activation vector, as the sparse FFN needs them: the
// input is prepared once per token (Q4PreparedInput, core/kernels/q4_0_prepared_input.h has the
// layout), so each row's dot is a short loop with no per-row preparation. The kernels are the
// active kernel set's (core/kernels/sparse_kernels.h).
#include "core/kernels/q4_0_prepared_input.h"

namespace ember {

// sum over blocks of d_w * d_x * sum_j (q_j - 8) * x_j for one Q4_0 row of n_blocks * 32 values;
// the same integers as vec_dot_q4_0_q8_0 on the same input, summed in a different float order.
float dot_q4_0_prepared(const void* row, const Q4PreparedInput& x);
float dot_q4_0_prepared_scalar(const void* row, const Q4PreparedInput& x);
// out[r] = dot_q4_0_prepared(rows[r], x) for r < n, bit for bit, computed together where the CPU
// has a multi-row kernel (AVX-512 VNNI and AVX2: up to 8 rows at once): the input is loaded once for all of
// them and their rows stream in side by side, which keeps more memory reads in flight when the
// rows lie at random addresses (the sparse FFN's gate and up rows).
// `ahead`: rows the caller will read next (at most 8, each as long as these), requested from memory
// while these stream (AVX2 kernel; the others ignore it). Never changes a result.
void dot_q4_0_prepared_rows(const void* const* rows, int n, const Q4PreparedInput& x, float* out,
                            RowsAhead ahead = {});

}  // namespace ember
