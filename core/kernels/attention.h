#pragma once
// Attention of one query head over an F16 KV cache, in the single-pass "online softmax" form of
// flash attention, following the arithmetic of ggml's CPU flash-attention kernel (which llama.cpp
// uses by default on CPU): the query is rounded to F16, scores are F16 x F16 dots accumulated in
// F32, and the value accumulator is kept in F16. Matching it keeps greedy outputs identical to
// llama.cpp on F32 models, where nothing else differs.
#include <cstdint>

namespace ember {

struct AttentionHeadArgs {
  const float* q;          // (head_dim) query of this head, RoPE applied
  const uint16_t* k;       // first cached key of this head's KV group; rows `kv_stride` elements apart
  const uint16_t* v;       // first cached value of the group, same layout
  int64_t kv_stride;       // elements between positions (n_head_kv * head_dim)
  int64_t n_kv;            // positions to attend to: [0, n_kv)
  int64_t head_dim;
  float scale;             // 1/sqrt(head_dim)
  float* out;              // (head_dim)
  uint16_t* scratch;       // 2 * head_dim halves, owned by the calling thread
};

// PRECONDITION: n_kv >= 1.
void attention_head_f16(const AttentionHeadArgs& a);
// The scalar reference (tests compare the active kernel against it).
void attention_head_f16_reference(const AttentionHeadArgs& a);

}  // namespace ember
