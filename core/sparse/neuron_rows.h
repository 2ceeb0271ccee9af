#pragma once
// The down projection stored "neuron-major": one row per FFN neuron holding its down column (the
// n_embd values it adds to the output, scaled by its activation), so a sparse FFN reads only the
// rows of the active neurons, each one contiguous read.
//
// PowerInfer files may carry it as blk.N.ffn_down_t.weight. Otherwise the model keeps a transposed
// copy, built once: F32 when ffn_down is F32 (the same values exactly), F16 otherwise. Memory:
// n_layer * n_ff * n_embd * 2 bytes in F16 (mistral-7b: 32 * 14336 * 4096 * 2 = 3.76 GB, ~3.5x its
// Q4_0 down matrices; 1b: 22 * 5632 * 2048 * 2 = 0.51 GB), on top of the original weights, which
// the dense prefill still uses. F16 holds Q4_0/Q8_0 values d*q to 11 significant bits (relative
// error <= 2^-12), far below the error of the Q8_0 rounding the dense path applies to activations,
// so sparse results stay within float tolerance of dense ones. The neuron-bundle packs
// (`ember pack`) replace this copy by down columns in the model's own type.
#include <cstdint>
#include <vector>

#include "core/kernels/matmul.h"

namespace ember {

// The type of the transposed copy for a down matrix of type `down_type`.
GgmlType neuron_rows_type(GgmlType down_type);

// Copies down (n_embd rows of n_ff values: ggml {n_ff, n_embd}) into n_ff rows of n_embd values in
// `type` (F32 or F16) and returns the bytes. Throws std::invalid_argument for another type.
std::vector<uint8_t> transpose_to_neuron_rows(const MatrixView& down, GgmlType type);

// A view of such a copy (rows = n_ff neurons, cols = n_embd).
MatrixView neuron_rows_view(const std::vector<uint8_t>& bytes, GgmlType type, int64_t n_ff, int64_t n_embd);

}  // namespace ember
