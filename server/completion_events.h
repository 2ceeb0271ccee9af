#pragma once
// What one completion sends back, as bytes and messages, without any I/O: the SSE events of a
// stream (chat: a role chunk first, then content deltas, the finish chunk, the usage chunk, [DONE])
// or the whole JSON response of a non-streaming request. The connection only writes them.
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "core/model/generator.h"
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
};

class CompletionEvents {
 public:
  explicit CompletionEvents(CompletionShape shape) : shape_(std::move(shape)) {}

  bool streaming() const { return shape_.stream; }

  // The events for one piece of generated text.
  std::string text(std::string_view piece);
  // The events that end a stream: the finish chunk and usage (or an error event), then [DONE].
  std::string done(const GenerationStats& stats, const std::exception_ptr& error);
  // A non-streaming request's answer: 200 with the completion, or 500 with the engine's error.
  Response whole_response(const std::string& text, const GenerationStats& stats,
                          const std::exception_ptr& error) const;

 private:
  void add(std::string& out, nlohmann::json chunk) const;
  void add_role_chunk(std::string& out);

  const CompletionShape shape_;
  bool role_sent_ = false;  // the first chat chunk carries the role
};

// The events that end a stream the server cuts short while it shuts down: an error, [DONE].
std::string shutdown_events();

// The client's view of an exception the engine thread caught: its text, and a code telling a
// failed read of the model (the storage's fault, not the request's) apart.
std::string failure_message(const std::exception_ptr& error);
std::string failure_code(const std::exception_ptr& error);

}  // namespace ember::server
