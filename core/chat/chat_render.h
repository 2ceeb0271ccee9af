#pragma once
// Renders a conversation as prompt text in one chat template family, reproducing what the family's
// reference Jinja template produces (see chat_render.cpp for the exact layout of each).
//
// Roles: "system", "developer" (treated as system), "user", "assistant"; anything else throws.
// Families without a system turn (llama-2 writes it inside the first [INST] block; mistral and
// gemma prepend it to the next user message) merge system text into the following user message.
// A system message with no user message after it is written as if followed by an empty user turn,
// so its text is never silently dropped. Role alternation is not enforced.
// An empty conversation renders as the generation opener alone (if requested), plus the BOS text
// for families whose template always writes it.
#include <span>
#include <string>
#include <string_view>

#include "core/chat/chat_template.h"

namespace ember {

struct ChatMessage {
  std::string role;
  std::string content;
};

struct RenderedChat {
  std::string text;
  // True when `text` begins with the BOS text the template wrote: the caller tokenizes `text`
  // with parse_special=true and must then not add another BOS.
  bool starts_with_bos = false;
};

// add_generation_prompt appends the assistant turn opener (llama-2 and mistral have none: their
// prompt already ends with [/INST]). bos_text/eos_text are the model's BOS/EOS token texts
// (e.g. "<s>", "</s>"), written inline by the families whose templates do so; either may be empty.
// Throws std::invalid_argument on an unknown role, naming it and the message index.
RenderedChat render_chat(ChatTemplate t, std::span<const ChatMessage> messages, bool add_generation_prompt,
                         std::string_view bos_text, std::string_view eos_text);

}  // namespace ember
