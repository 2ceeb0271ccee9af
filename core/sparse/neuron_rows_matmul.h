#pragma once
// The down projection from neuron-major rows, for many tokens at once:
//   out[t] = sum over neurons i (ascending) of h[t][i] * rows[i]
// where rows[i] is neuron i's down column (core/sparse/neuron_rows.h). A neuron-bundle pack has
// no ffn_down matrix, only these rows inside its bundles, so its dense FFN (prefill batches and
// dense decode) computes the down projection here instead of with matmul. Terms with h == 0 are
// skipped: in ReLU-family FFNs most are, so this is sparse in practice even on the dense path.
//
// Threads: the work is split into (output strip, token block) tiles; each tile sums its neurons in
// ascending order, so results do not depend on the thread count, and equal the scalar reference.
// Quantized rows are dequantized one strip slice at a time into a stack buffer: no allocation.
// The slices of the next used rows are prefetched (in a pack they lie a whole bundle apart).
// Speed: float multiply-adds of the non-zero terms only; for prefill batches this is ~2x slower
// than the int8 matmul of a plain ffn_down at 13 % active neurons (docs/pack-format.md).
#include <cstdint>

#include "core/kernels/matmul.h"
#include "core/kernels/thread_pool.h"

namespace ember {

// PRECONDITIONS: rows.type has kernel traits; rows.cols = n_embd is a multiple of its block size;
// h holds n_tokens rows of rows.rows (n_ff) floats, h_stride apart; out holds n_tokens rows of
// n_embd floats, out_stride apart (overwritten, or added to with `accumulate`: the rows of a
// matrix given in consecutive slices, ascending, sum to exactly what the whole matrix gives, which
// is how the neuron cache streams a layer's bundles past the FFN, core/cache/offloaded_ffn.h).
void neuron_rows_matmul(const MatrixView& rows, const float* h, int64_t n_tokens, int64_t h_stride, float* out,
                        int64_t out_stride, ThreadPool& pool, bool accumulate = false);

// The reference: one thread, scalar kernels, whole rows dequantized, the same summation order.
void neuron_rows_matmul_reference(const MatrixView& rows, const float* h, int64_t n_tokens, int64_t h_stride,
                                  float* out, int64_t out_stride);

}  // namespace ember
