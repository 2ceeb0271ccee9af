#pragma once
// The small per-token operations of the llama forward pass. Each follows ggml's arithmetic
// (accumulation type, order of multiplication) so Ember's logits track llama.cpp's closely.
#include <cstdint>

#include "core/model/model_config.h"

namespace ember {

// y = x / sqrt(mean(x^2) + eps) * w.   PRECONDITION: n > 0; y may alias x.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

// Precomputed cos/sin of RoPE ("NORM" mode: rotates adjacent pairs (x[2i], x[2i+1])) for one
// position: cs[2i] = cos(pos * theta^(-2i/n_rot)), cs[2i+1] = sin(...). The angle is built by
// repeated multiplication in float as ggml does, so tables agree bit for bit.
void rope_table(int64_t pos, int64_t n_rot, float theta, float* cs);
// Rotates the first n_rot dims of each of n_heads vectors of head_dim floats in place.
void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cs);

// x[i] += y[i].
void add_in_place(float* x, const float* y, int64_t n);

}  // namespace ember
