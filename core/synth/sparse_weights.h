#pragma once
// Row generation for the tensors that the sparse design (sparse_design.h) shapes in ReLU / dReLU
// synthetic models. The other tensors (attention q/k/v, the output head) are drawn as in SiLU models.
#include <cstdint>

#include "core/synth/synth_shape.h"

namespace ember::synth {

bool drawn_by_sparse_design(TensorRole role);

// Fills rows [row_begin, row_end) of `spec` (spec.sparse.enabled(), drawn_by_sparse_design(role)).
void generate_sparse_rows(const TensorSpec& spec, uint64_t seed, uint64_t row_begin, uint64_t row_end, float* out);

// Zeroes an embedding row's slow dimensions (those shared with successor-cycle neighbours) and
// the bias channel, leaving what is the token's own: the sparse embedding's other dimensions are
// the plain draw's (draw_plain_row), so this works on either.
void keep_fast_dimensions(float* embedding_row, int64_t dim);

}  // namespace ember::synth
