#pragma once
// The pieces render_chat and the tool-call prompt share (internal to core/chat): prompt text that
// remembers which runs the template wrote and which came from message content
// (RenderedChat::segments), and a conversation as turns of such text.
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/chat_render.h"

namespace ember::chat_detail {

// Jinja's `trim` / Python's str.strip() on ASCII whitespace.
std::string_view trim(std::string_view s);

class ChatText {
 public:
  ChatText() = default;
  static ChatText of_content(std::string_view s) {
    ChatText t;
    t.content(s);
    return t;
  }

  void markup(std::string_view s) { append(s, false); }
  void content(std::string_view s) { append(s, true); }
  void append(const ChatText& other);
  // Jinja's `trim` over the whole text, whichever runs the whitespace is in.
  void strip();
  ChatText stripped() const {
    ChatText t = *this;
    t.strip();
    return t;
  }
  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }
  void reserve(size_t n) { text_.reserve(n); }
  void move_into(RenderedChat& r);

 private:
  void append(std::string_view s, bool is_content);

  std::string text_;
  std::vector<ChatSegment> segments_;
};

// Tool: a tool's result, kept as its own turn only by the families with a turn for it (llama-3's
// ipython header, mistral's [TOOL_RESULTS]); the others see it as a user turn (tool_prompt.cpp).
enum class Role { System, User, Assistant, Tool };

struct Turn {
  Role role;
  ChatText body;
  // Written before the turn's opener (mistral's [AVAILABLE_TOOLS] block before the last [INST]).
  ChatText preamble;
};

}  // namespace ember::chat_detail
