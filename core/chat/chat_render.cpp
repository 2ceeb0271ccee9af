#include "core/chat/chat_render.h"

#include <utility>
#include <vector>

#include "core/chat/chat_text.h"
#include "core/chat/tool_prompt.h"

namespace ember {
namespace {

using chat_detail::ChatText;
using chat_detail::Role;
using chat_detail::Turn;

std::string_view role_name(Role r) {
  switch (r) {
    case Role::System: return "system";
    case Role::User: return "user";
    case Role::Assistant: return "assistant";
    case Role::Tool: return "ipython";  // llama-3.1's role for tool output (the only family that names it)
  }
  return "user";
}

// Families without a system turn carry system text forward into the next user message. Several
// system messages in a row are joined by a blank line.
struct PendingSystem {
  ChatText text;
  bool present = false;
  void add(const ChatText& s) {
    if (present) text.markup("\n\n");
    text.append(s);
    present = true;
  }
  // The user content with the pending system text in front (separated by `sep`), then cleared.
  ChatText merge_into(const ChatText& user, std::string_view sep) {
    ChatText out;
    if (present) {
      out = std::move(text);
      if (!user.empty()) out.markup(sep);
    }
    out.append(user);
    text = ChatText();
    present = false;
    return out;
  }
};

// One turn of the "header, role, header end, content, turn end" families: everything but the
// content is template markup.
void role_turn(ChatText& out, std::string_view open, Role role, std::string_view close, const ChatText& body,
               std::string_view end) {
  out.markup(open);
  out.markup(role_name(role));
  out.markup(close);
  out.append(body);
  out.markup(end);
}

// <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
void render_chatml(ChatText& out, const std::vector<Turn>& turns, bool gen) {
  for (const auto& t : turns) role_turn(out, "<|im_start|>", t.role, "\n", t.body, "<|im_end|>\n");
  if (gen) out.markup("<|im_start|>assistant\n");
}

// BOS<|start_header_id|>role<|end_header_id|>\n\n{content|trim}<|eot_id|> ... (BOS before the first turn only)
void render_llama3(ChatText& out, const std::vector<Turn>& turns, bool gen, std::string_view bos) {
  if (!turns.empty()) out.markup(bos);
  for (const auto& t : turns) {
    role_turn(out, "<|start_header_id|>", t.role, "<|end_header_id|>\n\n", t.body.stripped(), "<|eot_id|>");
  }
  if (gen) out.markup("<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// <|role|>\ncontent EOS\n ... <|assistant|>\n
void render_zephyr(ChatText& out, const std::vector<Turn>& turns, bool gen, std::string_view eos) {
  for (const auto& t : turns) {
    role_turn(out, "<|", t.role, "|>\n", t.body, eos);
    out.markup("\n");
  }
  if (gen) out.markup("<|assistant|>\n");
}

// Phi-3-small / Phi-3.5 layout: BOS<|role|>\ncontent<|end|>\n ... <|assistant|>\n; an empty system
// message is skipped, as those templates do.
void render_phi3(ChatText& out, const std::vector<Turn>& turns, bool gen, std::string_view bos) {
  out.markup(bos);
  for (const auto& t : turns) {
    if (t.role == Role::System && t.body.empty()) continue;
    role_turn(out, "<|", t.role, "|>\n", t.body, "<|end|>\n");
  }
  if (gen) out.markup("<|assistant|>\n");
}

// BOS<start_of_turn>user\n{system\n\n}{content|trim}<end_of_turn>\n<start_of_turn>model\n...; Gemma
// has no system role, so system text opens the next user turn (as Gemma 3's template does).
void render_gemma(ChatText& out, const std::vector<Turn>& turns, bool gen, std::string_view bos) {
  out.markup(bos);
  PendingSystem system;
  auto user_turn = [&](const ChatText& content) {
    out.markup("<start_of_turn>user\n");
    out.append(system.merge_into(content.stripped(), "\n\n"));
    out.markup("<end_of_turn>\n");
  };
  for (const auto& t : turns) {
    if (t.role == Role::System) {
      system.add(t.body.stripped());
    } else if (t.role == Role::Assistant) {
      out.markup("<start_of_turn>model\n");
      out.append(t.body.stripped());
      out.markup("<end_of_turn>\n");
    } else {
      user_turn(t.body);
    }
  }
  if (system.present) user_turn({});
  if (gen) out.markup("<start_of_turn>model\n");
}

// Mistral-7B-Instruct v0.1/v0.2: BOS[INST] {system\n}user [/INST]assistant EOS[INST] ... [/INST];
// v0.3's tool blocks ([AVAILABLE_TOOLS] before the last [INST], [TOOL_RESULTS] turns) come ready
// made from tool_prompt.cpp.
void render_mistral(ChatText& out, const std::vector<Turn>& turns, std::string_view bos, std::string_view eos) {
  out.markup(bos);
  PendingSystem system;
  auto user_turn = [&](const Turn* t) {
    if (t != nullptr) out.append(t->preamble);
    out.markup("[INST] ");
    out.append(system.merge_into(t != nullptr ? t->body : ChatText(), "\n"));
    out.markup(" [/INST]");
  };
  for (const auto& t : turns) {
    if (t.role == Role::System) {
      system.add(t.body);
    } else if (t.role == Role::User) {
      user_turn(&t);
    } else if (t.role == Role::Tool) {
      out.append(t.body);
    } else {
      out.append(t.body);
      out.markup(eos);
    }
  }
  if (system.present) user_turn(nullptr);
}

// Meta's Llama-2-chat template: each user turn is BOS[INST] {(<<SYS>>\nsystem\n<</SYS>>\n\n + user).strip()} [/INST]
// and each assistant turn is " {content.strip()} EOS".
void render_llama2(ChatText& out, const std::vector<Turn>& turns, std::string_view bos, std::string_view eos) {
  PendingSystem system;
  auto user_turn = [&](const ChatText& content) {
    ChatText body;
    if (system.present) {
      body.markup("<<SYS>>\n");
      body.append(system.merge_into({}, {}));
      body.markup("\n<</SYS>>\n\n");
    }
    body.append(content);
    body.strip();
    out.markup(bos);
    out.markup("[INST] ");
    out.append(body);
    out.markup(" [/INST]");
  };
  for (const auto& t : turns) {
    if (t.role == Role::System) {
      system.add(t.body);
    } else if (t.role == Role::Assistant) {
      out.markup(" ");
      out.append(t.body.stripped());
      out.markup(" ");
      out.markup(eos);
    } else {
      user_turn(t.body);
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
                         std::string_view bos_text, std::string_view eos_text, std::span<const ToolDefinition> tools) {
  const std::vector<Turn> turns = chat_detail::conversation_turns(t, messages, tools);
  ChatText out;
  size_t body_bytes = 0;
  for (const auto& turn : turns) body_bytes += turn.body.text().size() + turn.preamble.text().size();
  out.reserve(body_bytes + 48 * (turns.size() + 1) + bos_text.size() * turns.size());

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
