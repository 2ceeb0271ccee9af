#pragma once
// The OpenAI-compatible request and response shapes, as plain JSON <-> structs. No HTTP here, so
// validation is testable on its own and the session code stays about connections.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include <vector>

#include "core/chat/chat_render.h"
#include "core/model/generator.h"
#include "core/sampling/sampler.h"

namespace ember::server {

// A request the client must fix: becomes a 400 with `param` naming the field.
class BadRequest : public std::runtime_error {
 public:
  BadRequest(const std::string& message, std::string param = {})
      : std::runtime_error(message), param_(std::move(param)) {}
  const std::string& param() const { return param_; }

 private:
  std::string param_;
};

struct CompletionRequest {
  std::string prompt;                // /v1/completions
  std::vector<ChatMessage> messages;  // /v1/chat/completions
  int64_t max_tokens = 16;  // OpenAI's default for /v1/completions
  bool max_tokens_given = false;  // chat without it: the rest of the context window
  SamplingParams sampling;  // Ember's (llama.cpp's) defaults where the request says nothing
  bool seed_given = false;
  bool stream = false;
};

// Field limits; anything outside is a BadRequest.
struct RequestLimits {
  int64_t max_tokens = 1 << 20;     // further capped by the context window after tokenizing
  size_t max_prompt_bytes = 1 << 20;  // the prompt, or all message contents together
  size_t max_messages = 1024;
};

// Parses a /v1/completions body. Unknown fields are ignored (clients send many); known ones are
// type- and range-checked. Throws BadRequest.
CompletionRequest parse_completion_request(const std::string& body, const RequestLimits& limits = {});
// The same for /v1/chat/completions: `messages` (role + content as a string or an array of text
// parts) instead of `prompt`; `max_completion_tokens` is accepted as a synonym of `max_tokens`.
CompletionRequest parse_chat_request(const std::string& body, const RequestLimits& limits = {});

// Response bodies. `created` is Unix seconds.
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   const std::string& text, FinishReason finish, int64_t prompt_tokens,
                                   int64_t completion_tokens);
// One streamed chunk; finish is null until the last one.
nlohmann::json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                                const std::string& text, std::optional<FinishReason> finish);
// chat.completion and chat.completion.chunk. A chunk's delta carries `role` when `first`, the text
// as `content` when not null, and nothing in the last chunk (the one with `finish`).
nlohmann::json chat_response(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                             FinishReason finish, int64_t prompt_tokens, int64_t completion_tokens);
nlohmann::json chat_chunk(const std::string& id, int64_t created, const std::string& model, bool first,
                          const std::optional<std::string>& text, std::optional<FinishReason> finish);
nlohmann::json model_object(const std::string& id, int64_t created);
nlohmann::json model_list(const std::string& id, int64_t created);
nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param = {},
                          const std::string& code = {});

// OpenAI's finish_reason: "length" or "stop".
const char* openai_finish_reason(FinishReason finish);

// "data: {json}\n\n"
std::string sse_event(const nlohmann::json& payload);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace ember::server
