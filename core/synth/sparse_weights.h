#pragma once
// Row generation for the tensors that the sparse design (sparse_design.h) shapes in ReLU / dReLU
// synthetic models. The other tensors (attention q/k/v, the output head) are drawn as in SiLU models.
#include <cstdint>

#include "core/synth/synth_shape.h"

namespace ember::synth {

bool drawn_by_sparse_design(TensorRole role);

// Fills rows [row_begin, row_end) of `spec` (spec.sparse.enabled(), drawn_by_sparse_design(role)).
// A stacked expert tensor (three dimensions) is drawn expert by expert, each expert a sparse FFN
// of its own (sparse_design.h: FfnUnit).
void generate_sparse_rows(const TensorSpec& spec, uint64_t seed, uint64_t row_begin, uint64_t row_end, float* out);

// Token embeddings whose odd dimensions are slow: a smooth function (sinusoids of 17 to 100
// tokens' period) of the token's place on its successor cycle, so the tokens of a greedy text, which
// mostly follow the cycle, share half their embedding with their neighbours. The other dimensions
// are the plain draw's. Sparse models (with their bias channel on top) and mixtures of experts
// (whose routers read the slow dimensions, router_design.h) have these embeddings.
void slow_embedding_rows(const TensorSpec& spec, uint64_t seed, uint64_t row_begin, uint64_t row_end, float* out);
inline bool is_slow_dimension(int64_t d) { return d % 2 == 1; }

// Zeroes an embedding row's slow dimensions (those shared with successor-cycle neighbours) and
// the bias channel, leaving what is the token's own: the sparse embedding's other dimensions are
// the plain draw's (draw_plain_row), so this works on either.
void keep_fast_dimensions(float* embedding_row, int64_t dim);

}  // namespace ember::synth
