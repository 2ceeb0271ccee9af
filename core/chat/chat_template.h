#pragma once
// Chat template families: naming, recognition from a model's `tokenizer.chat_template`, and the
// choice of a family when the model has none. Ember never evaluates the Jinja source of a model
// file (it is untrusted code); it only looks for the markers that identify a well-known family and
// then renders that family with its own C++ code (core/chat/chat_render.h).
//
// Resolution order (resolve_chat_template):
//   1. `--chat-template NAME` (an override) wins;
//   2. otherwise the family recognised in `tokenizer.chat_template`;
//   3. otherwise the fallback by tokenizer kind (fallback_chat_template):
//        tokenizer.ggml.model == "llama" (SentencePiece vocab)  -> llama-2 ([INST] ... [/INST]),
//        anything else (gpt2-style byte-level BPE, or unknown)   -> chatml.
//      SentencePiece chat models without a template are mostly Llama-2 derivatives; BPE ones are
//      mostly ChatML-tuned (Qwen, Hermes, ...), and ChatML reads as plain text where its markers
//      are not special tokens.
#include <optional>
#include <string>
#include <string_view>

namespace ember {

enum class ChatTemplate { Llama2, Mistral, ChatML, Llama3, Zephyr, Gemma, Phi3 };

// "llama-2", "mistral", "chatml", "llama-3", "zephyr", "gemma", "phi-3" (also llama.cpp's spellings
// "llama2", "llama3", "phi3"); nullopt for anything else.
std::optional<ChatTemplate> parse_chat_template_name(std::string_view name);
// The canonical name, one of those above.
std::string_view chat_template_name(ChatTemplate t);
// All canonical names, comma separated (for error and help messages).
std::string chat_template_names();

// Recognises the family from distinctive markers in the Jinja source, checked in this order:
//   "<|im_start|>" -> ChatML; "<|start_header_id|>" -> Llama3; "<start_of_turn>" -> Gemma;
//   "[INST]" -> Llama2 when "<<SYS>>" is present, else Mistral;
//   "<|end|>" with "<|user|>" or "<|assistant|>" -> Phi3;
//   "<|user|>" or "<|assistant|>" with an end-of-turn marker ("</s>", "eos_token",
//   "<|endoftext|>") -> Zephyr.
// Never evaluates the template. nullopt when no family matches (including an empty source).
std::optional<ChatTemplate> detect_chat_template(std::string_view jinja_source);

// The documented fallback (see the top of this file) for a model without a recognised template;
// `tokenizer_model` is the GGUF key tokenizer.ggml.model ("llama", "gpt2", ...), may be empty.
ChatTemplate fallback_chat_template(std::string_view tokenizer_model);

enum class ChatTemplateSource { Override, Detected, Fallback };
struct ResolvedChatTemplate {
  ChatTemplate family;
  ChatTemplateSource source;
};
// Applies the resolution order above. Throws std::invalid_argument naming the bad value and the
// accepted names when `override_name` is given but unknown.
ResolvedChatTemplate resolve_chat_template(std::optional<std::string_view> override_name,
                                           std::optional<std::string_view> jinja_source,
                                           std::string_view tokenizer_model);

}  // namespace ember
