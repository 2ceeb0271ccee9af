#pragma once
// The OpenAI-compatible request and response shapes, as plain JSON <-> structs. No HTTP here, so
// validation is testable on its own and the session code stays about connections.
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include <vector>

#include "core/chat/chat_render.h"
#include "core/model/generator.h"
#include "core/sampling/sampler.h"
#include "server/structured_output.h"
#include "server/tool_request.h"

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

// One prompt of /v1/completions: text, or token ids the client tokenized.
struct PromptInput {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_tokens = false;
};

struct CompletionRequest {
  std::string model;                  // the model the client names; empty: not given (the default one)
  // How long the model stays loaded after this request (server/keep_alive.h); nullopt: the server's.
  std::optional<std::chrono::milliseconds> keep_alive;
  std::vector<PromptInput> prompts;   // /v1/completions: one or more, each answered by n choices
  bool echo = false;                  // /v1/completions: each choice's text starts with its prompt
  std::vector<ChatMessage> messages;  // /v1/chat/completions
  int64_t max_tokens = 16;  // OpenAI's default for /v1/completions
  bool max_tokens_given = false;  // chat without it: the rest of the context window
  SamplingParams sampling;  // Ember's (llama.cpp's) defaults where the request says nothing
  bool seed_given = false;
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage: a usage chunk before [DONE]
  std::vector<std::string> stop;      // stop sequences (not included in the output)
  OutputGrammar grammar;              // response_format / grammar / json_schema, as GBNF
  // Log-probabilities: -1 none; else each token's, with this many alternatives (chat:
  // logprobs + top_logprobs; completions: the integer logprobs).
  int top_logprobs = -1;
  ToolRequest tools;  // chat: tools, tool_choice, parallel_tool_calls
  int n = 1;          // choices, generated one after another from the prompt evaluated once
};

// Field limits; anything outside is a BadRequest.
struct RequestLimits {
  int64_t max_tokens = 1 << 20;     // further capped by the context window after tokenizing
  size_t max_prompt_bytes = 1 << 20;  // the prompt, or all message contents together
  size_t max_messages = 1024;
  size_t max_prompt_tokens = 1 << 20;  // a prompt given as token ids
  size_t max_stop_strings = 4;       // OpenAI's limit
  size_t max_stop_bytes = 256;       // per stop string
  size_t max_logit_bias = 1024;      // entries
  StructuredOutputLimits output;     // grammar and schema sizes
  int max_top_logprobs = 20;         // OpenAI's limit
  ToolLimits tools;
  int max_choices = 16;              // n x prompts (each choice is a whole generation: a cost, not a shape)
};

// Parses a /v1/completions body. Unknown fields are ignored (clients send many); known ones are
// type- and range-checked. `prompt` is a string, an array of strings, an array of token ids or an
// array of token-id arrays (-> prompts); `echo` repeats the prompt (then max_tokens may be 0, to
// score a prompt with logprobs). Common to both
// endpoints: max_tokens / max_completion_tokens (max_tokens wins), temperature, top_p, top_k,
// min_p, presence_penalty, frequency_penalty, repeat_penalty, logit_bias (-100 bans the token:
// stored as -inf), seed, stream, stream_options.include_usage (only with stream), n (choices), stop,
// user (ignored), response_format / grammar / json_schema (structured_output.h); logprobs (an
// integer here, a boolean with top_logprobs on chat). Throws BadRequest.
CompletionRequest parse_completion_request(const std::string& body, const RequestLimits& limits = {});
// The same for /v1/chat/completions: `messages` (role + content as a string or an array of text
// parts; an assistant's `tool_calls`; a tool result's `tool_call_id`) instead of `prompt`, and the
// tools (tool_request.h).
CompletionRequest parse_chat_request(const std::string& body, const RequestLimits& limits = {});

// Response bodies. `created` is Unix seconds. `logprobs` is the choice's logprobs object (null:
// none asked for; see logprobs_json.h).
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   const std::string& text, FinishReason finish, int64_t prompt_tokens,
                                   int64_t completion_tokens, const nlohmann::json& logprobs = nullptr);
// One streamed chunk; finish is null until the last one.
nlohmann::json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                                const std::string& text, std::optional<FinishReason> finish,
                                const nlohmann::json& logprobs = nullptr);
// chat.completion and chat.completion.chunk. A chunk's delta carries `role` when `first`, the text
// as `content` when not null, and nothing in the last chunk (the one with `finish`).
nlohmann::json chat_response(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                             FinishReason finish, int64_t prompt_tokens, int64_t completion_tokens,
                             const nlohmann::json& logprobs = nullptr);
nlohmann::json chat_chunk(const std::string& id, int64_t created, const std::string& model, bool first,
                          const std::optional<std::string>& text, std::optional<FinishReason> finish,
                          const nlohmann::json& logprobs = nullptr);
// The entries of message.tool_calls (and, with `index`, of a chunk's delta.tool_calls, numbered
// from first_index): {id, type: "function", function: {name, arguments}}.
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, size_t first_index, bool with_index);
nlohmann::json model_object(const std::string& id, int64_t created);
nlohmann::json model_list(const std::string& id, int64_t created);
nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param = {},
                          const std::string& code = {});

// OpenAI's finish_reason: "stop" (end of generation or a stop sequence) or "length".
const char* openai_finish_reason(FinishReason finish);

// "data: {json}\n\n"
std::string sse_event(const nlohmann::json& payload);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace ember::server
