#pragma once
// Tool calls in a model's own words: which syntax each chat-template family uses to call a
// function, and reading the calls back out of the generated text, whole or as it streams.
//
//   Hermes   (chatml: Qwen 2.5, Hermes 2/3)  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   Llama3   (llama-3.1 and later)           {"name": "f", "parameters": {...}}
//   Mistral  (mistral v0.3 and later)        [TOOL_CALLS] [{"name": "f", "arguments": {...}}, ...]
//   Generic  (every other family)            {"tool_calls": [{"name": "f", "arguments": {...}}, ...]}
//                                             or {"response": "text"}: a reply that is not a call
// Control tokens ([TOOL_CALLS], <|python_tag|>) are not part of the generated text, so the llama-3
// and mistral forms are recognised by the JSON that follows them. The generic form is what the
// model is told to write (tool_prompt.cpp) and is always grammar-constrained (tool_grammar.h):
// every reply is one of its two objects.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/chat_render.h"
#include "core/chat/chat_template.h"

namespace ember {

enum class ToolSyntax { Hermes, Llama3, Mistral, Generic };

ToolSyntax tool_syntax(ChatTemplate t);

// What an assistant reply says: its text and the calls it makes (ids empty: the server names them).
struct ToolReply {
  std::string content;
  std::vector<ToolCall> calls;
};

// Splits generated text, piece by piece, into the text to show now and the calls. Text is passed on
// as soon as it cannot be the start of a call (Hermes: anything before "<tool_call>"; the JSON forms:
// a reply whose first non-blank character does not open one); a possible call is held until the
// end and then parsed. A call that does not parse (cut by max_tokens, malformed JSON, no name) is
// given back as text, so nothing generated is lost. The concatenation of push() and finish()'s
// content is what parse_tool_reply returns for the whole text.
class ToolReplyStream {
 public:
  explicit ToolReplyStream(ToolSyntax syntax) : syntax_(syntax) {}
  // The text that can be shown now (may be empty).
  std::string push(std::string_view piece);
  // The rest of the text and every call. Call once, after the last push.
  ToolReply finish();

 private:
  enum class State { Deciding, Text, Held, Response, ResponseEnded };
  void decide();
  void text_until_marker(std::string& out);
  void decode_response(std::string& out);

  ToolSyntax syntax_;
  State state_ = State::Deciding;
  std::string pending_;  // undecided text, a held call, or undecoded response bytes
};

ToolReply parse_tool_reply(ToolSyntax syntax, std::string_view text);

// JSON as Python's json.dumps writes it (", " and ": " separators, keys in their order, non-ASCII
// kept): the spacing the tool-calling models saw in training, for tool definitions and calls.
std::string python_style_json(const nlohmann::ordered_json& value);

}  // namespace ember
