#pragma once
// Renders a conversation as prompt text in one chat template family, reproducing what the family's
// reference Jinja template produces (see chat_render.cpp for the exact layout of each).
//
// Roles: "system", "developer" (treated as system), "user", "assistant", "tool"; anything else
// throws. Tool definitions, an assistant's tool calls and tool results are written in the family's
// own tool syntax (core/chat/tool_calls.h: ToolSyntax; tool_prompt.cpp has the layouts).
// Families without a system turn (llama-2 writes it inside the first [INST] block; mistral and
// gemma prepend it to the next user message) merge system text into the following user message.
// A system message with no user message after it is written as if followed by an empty user turn,
// so its text is never silently dropped. Role alternation is not enforced.
// An empty conversation renders as the generation opener alone (if requested), plus the BOS text
// for families whose template always writes it.
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/chat/chat_template.h"

namespace ember {

// A function call an assistant made: `arguments` is JSON text (an object), as OpenAI carries it.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};

// A function the model may call: `parameters` is its JSON Schema as text (keys in written order),
// empty for none.
struct ToolDefinition {
  std::string name;
  std::string description;
  std::string parameters;
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role_, std::string content_) : role(std::move(role_)), content(std::move(content_)) {}

  std::string role;
  std::string content;
  std::vector<ToolCall> tool_calls;  // role "assistant": the calls it made (content may be empty)
  std::string tool_call_id;          // role "tool": the call this is the result of
  std::string name;                  // role "tool": the function's name, where the client gave it
};

// A run of RenderedChat::text that the template wrote itself (markers, role names, separators, the
// BOS/EOS texts) or that was copied from a message's content.
struct ChatSegment {
  size_t offset = 0;
  size_t length = 0;
  bool is_content = false;
};

struct RenderedChat {
  std::string text;
  // `text` cut into template and content runs, in order, covering it exactly, none empty, each of
  // another kind than the one before. Only template runs may become special tokens: a message's
  // content is plain text whatever it contains ("</s>", "<|im_start|>"), or a user could end a turn
  // or forge another role's message.
  std::vector<ChatSegment> segments;
  // True when `text` begins with the BOS text the template wrote: the caller tokenizes the
  // template runs with parse_special=true and must then not add another BOS.
  bool starts_with_bos = false;
};

// add_generation_prompt appends the assistant turn opener (llama-2 and mistral have none: their
// prompt already ends with [/INST]). bos_text/eos_text are the model's BOS/EOS token texts
// (e.g. "<s>", "</s>"), written inline by the families whose templates do so; either may be empty.
// Throws std::invalid_argument on an unknown role, naming it and the message index.
// `tools` (may be empty) are described to the model the way its family expects.
RenderedChat render_chat(ChatTemplate t, std::span<const ChatMessage> messages, bool add_generation_prompt,
                         std::string_view bos_text, std::string_view eos_text,
                         std::span<const ToolDefinition> tools = {});

}  // namespace ember
