#pragma once
// Deterministic pseudo-random weights for synthetic models, drawn so that activations stay well
// scaled through every layer and greedy decoding does not collapse onto one token: zero-mean
// matrices with std ~ 1/sqrt(fan_in) (so each block adds an O(1) update to the residual stream),
// RMSNorm weights near 1, and an output head scaled so logits have a std of a few units.
// Every row is drawn from its own generator seeded by (seed, tensor name, row), so the values do
// not depend on how rows are split across threads.
#include <cstdint>

#include "core/synth/synth_shape.h"

namespace ember::synth {

// Fills rows [row_begin, row_end) of `spec` (row length spec.ne[0]) into out.
void generate_rows(const TensorSpec& spec, uint64_t seed, uint64_t row_begin, uint64_t row_end, float* out);

// The plain draw of row r: uniform values with the role's std (norms around 1), no successor bonus
// and no sparse design. Shared with sparse_weights.cpp, which builds on it.
void draw_plain_row(const TensorSpec& spec, uint64_t seed, uint64_t r, float* row);

// The token that the output head's successor bonus favours after token t: (t a + 1) mod n_vocab
// for a fixed unit a, a permutation whose cycles greedy text mostly follows.
uint64_t successor_token(uint64_t t, uint64_t n_vocab);

// Standard deviation the values of a tensor are drawn with (norms: spread around their mean of 1).
float weight_std(const TensorSpec& spec);

}  // namespace ember::synth
