#include "core/chat/chat_render.h"

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

namespace ember {
namespace {

enum class Role { System, User, Assistant };

struct Turn {
  Role role;
  std::string_view content;
};

std::vector<Turn> validate_roles(std::span<const ChatMessage> messages) {
  std::vector<Turn> turns;
  turns.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    Role role;
    if (m.role == "system" || m.role == "developer") role = Role::System;
    else if (m.role == "user") role = Role::User;
    else if (m.role == "assistant") role = Role::Assistant;
    else
      throw std::invalid_argument("unknown chat role '" + m.role + "' in message " + std::to_string(i) +
                                  " (expected system, developer, user or assistant)");
    turns.push_back({role, m.content});
  }
  return turns;
}

std::string_view role_name(Role r) {
  switch (r) {
    case Role::System: return "system";
    case Role::User: return "user";
    case Role::Assistant: return "assistant";
  }
  return "user";
}

// Jinja's `trim` / Python's str.strip() on ASCII whitespace.
std::string_view trim(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\v\f";
  const size_t first = s.find_first_not_of(ws);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(ws) - first + 1);
}

// Prompt text that remembers which runs the template wrote and which came from message content
// (RenderedChat::segments), so the caller can tokenize content as plain text.
class ChatText {
 public:
  void markup(std::string_view s) { append(s, false); }
  void content(std::string_view s) { append(s, true); }
  void append(const ChatText& other) {
    for (const ChatSegment& seg : other.segments_) {
      append(std::string_view(other.text_).substr(seg.offset, seg.length), seg.is_content);
    }
  }
  // Jinja's `trim` over the whole text, whichever runs the whitespace is in.
  void strip() {
    const std::string_view kept = trim(text_);
    const size_t first = kept.empty() ? 0 : static_cast<size_t>(kept.data() - text_.data());
    const size_t last = first + kept.size();
    std::vector<ChatSegment> cut;
    for (ChatSegment seg : segments_) {
      const size_t begin = std::max(seg.offset, first), end = std::min(seg.offset + seg.length, last);
      if (begin < end) cut.push_back({begin - first, end - begin, seg.is_content});
    }
    text_ = std::string(kept);
    segments_ = std::move(cut);
  }
  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }
  void reserve(size_t n) { text_.reserve(n); }
  void move_into(RenderedChat& r) {
    r.text = std::move(text_);
    r.segments = std::move(segments_);
  }

 private:
  void append(std::string_view s, bool is_content) {
    if (s.empty()) return;
    if (!segments_.empty() && segments_.back().is_content == is_content) {
      segments_.back().length += s.size();
    } else {
      segments_.push_back({text_.size(), s.size(), is_content});
    }
    text_ += s;
  }

  std::string text_;
  std::vector<ChatSegment> segments_;
};

// Families without a system turn carry system text forward into the next user message. Several
// system messages in a row are joined by a blank line.
struct PendingSystem {
  ChatText text;
  bool present = false;
  void add(std::string_view s) {
    if (present) text.markup("\n\n");
    text.content(s);
    present = true;
  }
  // The user content with the pending system text in front (separated by `sep`), then cleared.
  ChatText merge_into(std::string_view user, std::string_view sep) {
    ChatText out;
    if (present) {
      out = std::move(text);
      if (!user.empty()) out.markup(sep);
    }
    out.content(user);
    text = ChatText();
    present = false;
    return out;
  }
};

// One turn of the "header, role, header end, content, turn end" families: everything but the
// content is template markup.
void role_turn(ChatText& out, std::string_view open, Role role, std::string_view close, std::string_view content,
               std::string_view end) {
  out.markup(open);
  out.markup(role_name(role));
  out.markup(close);
  out.content(content);
  out.markup(end);
}

// <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
void render_chatml(ChatText& out, const std::vector<Turn>& turns, bool gen) {
  for (const auto& t : turns) role_turn(out, "<|im_start|>", t.role, "\n", t.content, "<|im_end|>\n");
  if (gen) out.markup("<|im_start|>assistant\n");
}

// BOS<|start_header_id|>role<|end_header_id|>\n\n{content|trim}<|eot_id|> ... (BOS before the first turn only)
void render_llama3(ChatText& out, const std::vector<Turn>& turns, bool gen, std::string_view bos) {
  if (!turns.empty()) out.markup(bos);
  for (const auto& t : turns) {
    role_turn(out, "<|start_header_id|>", t.role, "<|end_header_id|>\n\n", trim(t.content), "<|eot_id|>");
  }
  if (gen) out.markup("<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// <|role|>\ncontent EOS\n ... <|assistant|>\n
void render_zephyr(ChatText& out, const std::vector<Turn>& turns, bool gen, std::string_view eos) {
  for (const auto& t : turns) {
    role_turn(out, "<|", t.role, "|>\n", t.content, eos);
    out.markup("\n");
  }
  if (gen) out.markup("<|assistant|>\n");
}

// Phi-3-small / Phi-3.5 layout: BOS<|role|>\ncontent<|end|>\n ... <|assistant|>\n; an empty system
// message is skipped, as those templates do.
void render_phi3(ChatText& out, const std::vector<Turn>& turns, bool gen, std::string_view bos) {
  out.markup(bos);
  for (const auto& t : turns) {
    if (t.role == Role::System && t.content.empty()) continue;
    role_turn(out, "<|", t.role, "|>\n", t.content, "<|end|>\n");
  }
  if (gen) out.markup("<|assistant|>\n");
}

// BOS<start_of_turn>user\n{system\n\n}{content|trim}<end_of_turn>\n<start_of_turn>model\n...; Gemma
// has no system role, so system text opens the next user turn (as Gemma 3's template does).
void render_gemma(ChatText& out, const std::vector<Turn>& turns, bool gen, std::string_view bos) {
  out.markup(bos);
  PendingSystem system;
  auto user_turn = [&](std::string_view content) {
    out.markup("<start_of_turn>user\n");
    out.append(system.merge_into(trim(content), "\n\n"));
    out.markup("<end_of_turn>\n");
  };
  for (const auto& t : turns) {
    if (t.role == Role::System) {
      system.add(trim(t.content));
    } else if (t.role == Role::User) {
      user_turn(t.content);
    } else {
      out.markup("<start_of_turn>model\n");
      out.content(trim(t.content));
      out.markup("<end_of_turn>\n");
    }
  }
  if (system.present) user_turn({});
  if (gen) out.markup("<start_of_turn>model\n");
}

// Mistral-7B-Instruct v0.1/v0.2: BOS[INST] {system\n}user [/INST]assistant EOS[INST] ... [/INST]
void render_mistral(ChatText& out, const std::vector<Turn>& turns, std::string_view bos, std::string_view eos) {
  out.markup(bos);
  PendingSystem system;
  auto user_turn = [&](std::string_view content) {
    out.markup("[INST] ");
    out.append(system.merge_into(content, "\n"));
    out.markup(" [/INST]");
  };
  for (const auto& t : turns) {
    if (t.role == Role::System) {
      system.add(t.content);
    } else if (t.role == Role::User) {
      user_turn(t.content);
    } else {
      out.content(t.content);
      out.markup(eos);
    }
  }
  if (system.present) user_turn({});
}

// Meta's Llama-2-chat template: each user turn is BOS[INST] {(<<SYS>>\nsystem\n<</SYS>>\n\n + user).strip()} [/INST]
// and each assistant turn is " {content.strip()} EOS".
void render_llama2(ChatText& out, const std::vector<Turn>& turns, std::string_view bos, std::string_view eos) {
  PendingSystem system;
  auto user_turn = [&](std::string_view content) {
    ChatText body;
    if (system.present) {
      body.markup("<<SYS>>\n");
      body.append(system.merge_into({}, {}));
      body.markup("\n<</SYS>>\n\n");
    }
    body.content(content);
    body.strip();
    out.markup(bos);
    out.markup("[INST] ");
    out.append(body);
    out.markup(" [/INST]");
  };
  for (const auto& t : turns) {
    if (t.role == Role::System) {
      system.add(t.content);
    } else if (t.role == Role::User) {
      user_turn(t.content);
    } else {
      out.markup(" ");
      out.content(trim(t.content));
      out.markup(" ");
      out.markup(eos);
    }
  }
  if (system.present) user_turn({});
}

bool writes_bos(ChatTemplate t) {
  return t == ChatTemplate::Llama2 || t == ChatTemplate::Mistral || t == ChatTemplate::Llama3 ||
         t == ChatTemplate::Gemma || t == ChatTemplate::Phi3;
}

}  // namespace

RenderedChat render_chat(ChatTemplate t, std::span<const ChatMessage> messages, bool add_generation_prompt,
                         std::string_view bos_text, std::string_view eos_text) {
  const std::vector<Turn> turns = validate_roles(messages);
  ChatText out;
  size_t content_bytes = 0;
  for (const auto& m : messages) content_bytes += m.content.size();
  out.reserve(content_bytes + 48 * (messages.size() + 1) + bos_text.size() * messages.size());

  switch (t) {
    case ChatTemplate::ChatML: render_chatml(out, turns, add_generation_prompt); break;
    case ChatTemplate::Llama3: render_llama3(out, turns, add_generation_prompt, bos_text); break;
    case ChatTemplate::Zephyr: render_zephyr(out, turns, add_generation_prompt, eos_text); break;
    case ChatTemplate::Phi3: render_phi3(out, turns, add_generation_prompt, bos_text); break;
    case ChatTemplate::Gemma: render_gemma(out, turns, add_generation_prompt, bos_text); break;
    case ChatTemplate::Mistral: render_mistral(out, turns, bos_text, eos_text); break;
    case ChatTemplate::Llama2: render_llama2(out, turns, bos_text, eos_text); break;
  }
  RenderedChat result;
  out.move_into(result);
  // Only a BOS the template wrote counts: content that happens to start with the BOS text does not.
  result.starts_with_bos = writes_bos(t) && !bos_text.empty() && !result.segments.empty() &&
                           !result.segments.front().is_content &&
                           result.segments.front().length >= bos_text.size() && result.text.starts_with(bos_text);
  return result;
}

}  // namespace ember
