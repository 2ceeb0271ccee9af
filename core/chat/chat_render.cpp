#include "core/chat/chat_render.h"

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

// Families without a system turn carry system text forward into the next user message. Several
// system messages in a row are joined by a blank line.
struct PendingSystem {
  std::string text;
  bool present = false;
  void add(std::string_view s) {
    if (present) text += "\n\n";
    text += s;
    present = true;
  }
  // The user content with the pending system text in front (separated by `sep`), then cleared.
  std::string merge_into(std::string_view user, std::string_view sep) {
    std::string out;
    if (present) {
      out = std::move(text);
      if (!user.empty()) out += sep;
    }
    out += user;
    text.clear();
    present = false;
    return out;
  }
};

// <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
void render_chatml(std::string& out, const std::vector<Turn>& turns, bool gen) {
  for (const auto& t : turns) {
    out += "<|im_start|>";
    out += role_name(t.role);
    out += '\n';
    out += t.content;
    out += "<|im_end|>\n";
  }
  if (gen) out += "<|im_start|>assistant\n";
}

// BOS<|start_header_id|>role<|end_header_id|>\n\n{content|trim}<|eot_id|> ... (BOS before the first turn only)
void render_llama3(std::string& out, const std::vector<Turn>& turns, bool gen, std::string_view bos) {
  if (!turns.empty()) out += bos;
  for (const auto& t : turns) {
    out += "<|start_header_id|>";
    out += role_name(t.role);
    out += "<|end_header_id|>\n\n";
    out += trim(t.content);
    out += "<|eot_id|>";
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

// <|role|>\ncontent EOS\n ... <|assistant|>\n
void render_zephyr(std::string& out, const std::vector<Turn>& turns, bool gen, std::string_view eos) {
  for (const auto& t : turns) {
    out += "<|";
    out += role_name(t.role);
    out += "|>\n";
    out += t.content;
    out += eos;
    out += '\n';
  }
  if (gen) out += "<|assistant|>\n";
}

// Phi-3-small / Phi-3.5 layout: BOS<|role|>\ncontent<|end|>\n ... <|assistant|>\n; an empty system
// message is skipped, as those templates do.
void render_phi3(std::string& out, const std::vector<Turn>& turns, bool gen, std::string_view bos) {
  out += bos;
  for (const auto& t : turns) {
    if (t.role == Role::System && t.content.empty()) continue;
    out += "<|";
    out += role_name(t.role);
    out += "|>\n";
    out += t.content;
    out += "<|end|>\n";
  }
  if (gen) out += "<|assistant|>\n";
}

// BOS<start_of_turn>user\n{system\n\n}{content|trim}<end_of_turn>\n<start_of_turn>model\n...; Gemma
// has no system role, so system text opens the next user turn (as Gemma 3's template does).
void render_gemma(std::string& out, const std::vector<Turn>& turns, bool gen, std::string_view bos) {
  out += bos;
  PendingSystem system;
  auto user_turn = [&](std::string_view content) {
    out += "<start_of_turn>user\n";
    out += system.merge_into(trim(content), "\n\n");
    out += "<end_of_turn>\n";
  };
  for (const auto& t : turns) {
    if (t.role == Role::System) {
      system.add(trim(t.content));
    } else if (t.role == Role::User) {
      user_turn(t.content);
    } else {
      out += "<start_of_turn>model\n";
      out += trim(t.content);
      out += "<end_of_turn>\n";
    }
  }
  if (system.present) user_turn({});
  if (gen) out += "<start_of_turn>model\n";
}

// Mistral-7B-Instruct v0.1/v0.2: BOS[INST] {system\n}user [/INST]assistant EOS[INST] ... [/INST]
void render_mistral(std::string& out, const std::vector<Turn>& turns, std::string_view bos, std::string_view eos) {
  out += bos;
  PendingSystem system;
  auto user_turn = [&](std::string_view content) {
    out += "[INST] ";
    out += system.merge_into(content, "\n");
    out += " [/INST]";
  };
  for (const auto& t : turns) {
    if (t.role == Role::System) {
      system.add(t.content);
    } else if (t.role == Role::User) {
      user_turn(t.content);
    } else {
      out += t.content;
      out += eos;
    }
  }
  if (system.present) user_turn({});
}

// Meta's Llama-2-chat template: each user turn is BOS[INST] {(<<SYS>>\nsystem\n<</SYS>>\n\n + user).strip()} [/INST]
// and each assistant turn is " {content.strip()} EOS".
void render_llama2(std::string& out, const std::vector<Turn>& turns, std::string_view bos, std::string_view eos) {
  PendingSystem system;
  auto user_turn = [&](std::string_view content) {
    std::string body;
    if (system.present) {
      body = "<<SYS>>\n" + system.merge_into({}, {}) + "\n<</SYS>>\n\n";
    }
    body += content;
    out += bos;
    out += "[INST] ";
    out += trim(body);
    out += " [/INST]";
  };
  for (const auto& t : turns) {
    if (t.role == Role::System) {
      system.add(t.content);
    } else if (t.role == Role::User) {
      user_turn(t.content);
    } else {
      out += ' ';
      out += trim(t.content);
      out += ' ';
      out += eos;
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
  RenderedChat result;
  std::string& out = result.text;
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
  result.starts_with_bos = writes_bos(t) && !bos_text.empty() && out.starts_with(bos_text);
  return result;
}

}  // namespace ember
