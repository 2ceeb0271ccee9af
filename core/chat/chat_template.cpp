#include "core/chat/chat_template.h"

#include <array>
#include <stdexcept>
#include <utility>

namespace ember {
namespace {

struct NamedTemplate {
  std::string_view name;
  ChatTemplate family;
};

// Canonical names first (chat_template_name returns the first match), then accepted aliases.
constexpr std::array<NamedTemplate, 10> kNames{{
    {"llama-2", ChatTemplate::Llama2}, {"mistral", ChatTemplate::Mistral}, {"chatml", ChatTemplate::ChatML},
    {"llama-3", ChatTemplate::Llama3}, {"zephyr", ChatTemplate::Zephyr},   {"gemma", ChatTemplate::Gemma},
    {"phi-3", ChatTemplate::Phi3},     {"llama2", ChatTemplate::Llama2},   {"llama3", ChatTemplate::Llama3},
    {"phi3", ChatTemplate::Phi3},
}};
constexpr size_t kCanonicalCount = 7;

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace

std::optional<ChatTemplate> parse_chat_template_name(std::string_view name) {
  for (const auto& entry : kNames)
    if (entry.name == name) return entry.family;
  return std::nullopt;
}

std::string_view chat_template_name(ChatTemplate t) {
  for (const auto& entry : kNames)
    if (entry.family == t) return entry.name;
  return "unknown";  // unreachable for a valid enumerator
}

std::string chat_template_names() {
  std::string out;
  for (size_t i = 0; i < kCanonicalCount; ++i) {
    if (i) out += ", ";
    out += kNames[i].name;
  }
  return out;
}

std::optional<ChatTemplate> detect_chat_template(std::string_view src) {
  // Order matters: the more specific markers first, since some templates quote others' tokens.
  if (contains(src, "<|im_start|>")) return ChatTemplate::ChatML;
  if (contains(src, "<|start_header_id|>")) return ChatTemplate::Llama3;
  if (contains(src, "<start_of_turn>")) return ChatTemplate::Gemma;
  if (contains(src, "[INST]")) return contains(src, "<<SYS>>") ? ChatTemplate::Llama2 : ChatTemplate::Mistral;
  const bool role_tags = contains(src, "<|user|>") || contains(src, "<|assistant|>");
  if (role_tags && contains(src, "<|end|>")) return ChatTemplate::Phi3;
  if (role_tags && (contains(src, "</s>") || contains(src, "eos_token") || contains(src, "<|endoftext|>")))
    return ChatTemplate::Zephyr;
  return std::nullopt;
}

ChatTemplate fallback_chat_template(std::string_view tokenizer_model) {
  return tokenizer_model == "llama" ? ChatTemplate::Llama2 : ChatTemplate::ChatML;
}

ResolvedChatTemplate resolve_chat_template(std::optional<std::string_view> override_name,
                                           std::optional<std::string_view> jinja_source,
                                           std::string_view tokenizer_model) {
  if (override_name) {
    if (auto t = parse_chat_template_name(*override_name)) return {*t, ChatTemplateSource::Override};
    throw std::invalid_argument("unknown chat template '" + std::string(*override_name) +
                                "' (expected one of: " + chat_template_names() + ")");
  }
  if (jinja_source)
    if (auto t = detect_chat_template(*jinja_source)) return {*t, ChatTemplateSource::Detected};
  return {fallback_chat_template(tokenizer_model), ChatTemplateSource::Fallback};
}

}  // namespace ember
