#pragma once
// Log-probabilities of a sampled token and of the most likely alternatives, from the logits it
// was drawn from (OpenAI's `logprobs` / `top_logprobs`). Tokens whose logit is -inf (masked by a
// constraint or banned) have no probability and are never listed among the alternatives.
#include <cstdint>
#include <span>
#include <vector>

namespace ember {

struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0.0f;
};

struct SampledLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // at most top_n, most likely first (ties: lower id first)
};

// log_softmax(logits)[chosen] and the top_n largest entries. top_n is clamped to [0, logits.size()].
SampledLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int top_n);

}  // namespace ember
