#pragma once
// What one completion sends back, as bytes and messages, without any I/O: the SSE events of a
// stream (chat: a role chunk first, then content deltas, the finish chunk, the usage chunk, [DONE])
// or the whole JSON response of a non-streaming request. The connection only writes them.
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/tool_calls.h"
#include "core/model/generator.h"
#include "server/engine_worker.h"
#include "server/http_message.h"

namespace ember::server {

struct CompletionShape {
  bool chat = false;           // /v1/chat/completions shapes
  bool stream = false;         // SSE
  bool include_usage = false;  // stream_options.include_usage (streams only)
  std::string id;              // "cmpl-N" / "chatcmpl-N"
  int64_t created = 0;         // Unix seconds
  std::string model;
  int64_t prompt_tokens = 0;
  bool logprobs = false;       // the request asked for log-probabilities
  int choices_per_prompt = 1;  // n: choice i answers prompt i / n
  // echo (completions): each prompt's text, which starts the text of its choices; empty: no echo.
  std::vector<std::string> echo;
  // Chat with tools that may be called: the reply is read for tool calls in this syntax; its text
  // is streamed as soon as it cannot be part of a call (core/chat/tool_calls.h).
  std::optional<ToolSyntax> tool_syntax;
};

// One finished choice of a non-streaming request.
struct ChoiceResult {
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  GenerationStats stats;
  std::vector<TokenLogprobs> prompt_logprobs;  // echo: its prompt's (given with the prompt's first choice)
};

// With n > 1 or several prompts the choices come one after another (GenerationJob::choices,
// later_prompts): text(), logprobs() and choice_end() refer to the current one, numbered from 0 in
// every chunk's `index` (prompt-major, as OpenAI numbers them).
class CompletionEvents {
 public:
  explicit CompletionEvents(CompletionShape shape) : shape_(std::move(shape)) { begin_choice(); }

  bool streaming() const { return shape_.stream; }

  // A generated token's log-probabilities: sent with the next text event.
  void logprobs(TokenLogprobs token) { pending_logprobs_.push_back(std::move(token)); }
  // echo with logprobs: the current prompt's tokens (sent with the echoed text of each of its choices).
  void prompt_logprobs(std::vector<TokenLogprobs> tokens) { prompt_logprobs_ = std::move(tokens); }
  // The events for one piece of generated text.
  std::string text(std::string_view piece);
  // The current choice ended and another follows: its finish chunk.
  std::string choice_end(const GenerationStats& stats);
  // The events that end a stream: the last choice's finish chunk and usage (or an error event),
  // then [DONE].
  std::string done(const GenerationStats& stats, const std::exception_ptr& error);
  // A non-streaming request's answer: 200 with the choices, or 500 with the engine's error.
  Response whole_response(std::vector<ChoiceResult> choices, const std::exception_ptr& error);

 private:
  void begin_choice();
  void add(std::string& out, nlohmann::json chunk) const;
  void add_role_chunk(std::string& out);
  // The current choice's finish chunk (with what a tool stream held back).
  void add_finish(std::string& out, const GenerationStats& stats);
  // The pending tokens' logprobs object (null when not asked for), then forgets them.
  nlohmann::json take_logprobs();
  // The ids the calls of this reply get: call_<completion number>_<choice>_<index>.
  void name_calls(std::vector<ToolCall>& calls, int choice) const;
  // The end of a stream with tools: what was held back (text, then one chunk per call).
  void add_held_reply(std::string& out, ToolReply reply);
  // usage: prompt tokens (and the cached prefix among them) once, completion tokens of all choices.
  nlohmann::json usage(int64_t completion_tokens) const;
  // A non-streaming choice in the endpoint's shape.
  nlohmann::json choice_json(ChoiceResult& c, int index);
  // echo: the current choice's prompt text (and prompt logprobs) as its first chunk, once.
  void add_echo(std::string& out);
  const std::string& echo_text() const;

  const CompletionShape shape_;
  int choice_ = -1;         // the current choice
  bool role_sent_ = false;  // the choice's first chat chunk carries the role
  std::vector<TokenLogprobs> pending_logprobs_;
  int64_t text_offset_ = 0;  // completions' text_offset of the next pending token
  std::optional<ToolReplyStream> tools_;  // shape_.tool_syntax set
  int64_t completion_tokens_ = 0;         // of the choices that ended
  int64_t cached_prompt_tokens_ = 0;      // each prompt's first choice's (later ones reuse its prompt)
  bool echo_sent_ = false;                // the current choice's
  std::vector<TokenLogprobs> prompt_logprobs_;  // echo: the current prompt's
};

// The events that end a stream the server cuts short while it shuts down: an error, [DONE].
std::string shutdown_events();

// The client's view of an exception the engine thread caught: its text, and a code telling a
// failed read of the model (the storage's fault, not the request's) apart.
std::string failure_message(const std::exception_ptr& error);
std::string failure_code(const std::exception_ptr& error);

}  // namespace ember::server
