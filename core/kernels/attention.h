#pragma once
// Causal attention over an F16 KV cache for the query heads that share one KV head (grouped-query
// attention): every cached key and value row is converted once and used by all heads of the
// group. Arithmetic: the queries are rounded to F16 as llama.cpp's CPU attention does, scores
// are F32 dot products, the softmax is exact (max-subtracted, F32), values accumulate in F32.
#include <cstdint>

namespace ember {

struct AttentionGroupArgs {
  const float* q;       // (n_q, head_dim) query heads of the group, RoPE applied, consecutive
  int64_t n_q;          // query heads in the group (n_head / n_head_kv)
  const uint16_t* k;    // this KV head's first cached key; positions `kv_stride` elements apart
  const uint16_t* v;    // this KV head's first cached value, same layout
  int64_t kv_stride;    // elements between positions (n_head_kv * head_dim)
  int64_t n_kv;         // positions attended to: [0, n_kv)
  int64_t head_dim;
  float scale;          // 1/sqrt(head_dim)
  float* out;           // (n_q, head_dim)
  // Scratch owned by the calling thread:
  float* scores;        // (n_q, n_kv)
  float* row;           // (head_dim) one converted key or value row
  float* qf;            // (n_q, head_dim) queries after F16 rounding
};

// PRECONDITION: n_kv >= 1, n_q >= 1.
void attention_group_f16(const AttentionGroupArgs& a);
// The scalar reference (tests compare the active kernel against it).
void attention_group_f16_reference(const AttentionGroupArgs& a);

}  // namespace ember
