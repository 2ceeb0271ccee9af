#pragma once
// Mixtral's expert gating, per token: softmax over the router's n_expert logits, the k most
// probable experts, their probabilities renormalised over those k (llama.cpp's llama MoE gating).
#include <cstdint>

namespace ember {

// chosen[0..k) = the k experts with the largest logits, most probable first (equal logits: the
// lower id first); weights[0..k) = their softmax probabilities divided by the sum of the k.
// Since the softmax's denominator cancels in that ratio, weights[j] = exp(l_j - l_max) / sum over
// the chosen of exp(l_i - l_max). Needs 1 <= k <= n_expert.
void route_token(const float* logits, int64_t n_expert, int64_t k, int32_t* chosen, float* weights);

}  // namespace ember
