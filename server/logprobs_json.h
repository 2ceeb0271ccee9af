#pragma once
// Generated tokens' log-probabilities in OpenAI's two response shapes: chat's
// `logprobs.content[]` (token, logprob, bytes, top_logprobs) and the legacy completions'
// parallel arrays (tokens, token_logprobs, top_logprobs, text_offset).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>

#include "server/engine_worker.h"

namespace ember::server {

nlohmann::json chat_logprobs(std::span<const TokenLogprobs> tokens);
// `text_offset` counts bytes of the completion's text from `first_offset` (the bytes already sent
// in earlier chunks of a stream).
// A prompt's first token (echo, NaN logprob) has null in token_logprobs and top_logprobs.
nlohmann::json completion_logprobs(std::span<const TokenLogprobs> tokens, int64_t first_offset);
// The arrays of `second` appended to those of `first` (echo: the prompt's, then the completion's).
nlohmann::json joined_completion_logprobs(nlohmann::json first, const nlohmann::json& second);

}  // namespace ember::server
