#pragma once
// Turns a parsed OpenAI request into an engine job: renders the chat template, tokenizes, checks
// the prompt against the context window and the sampling parameters against the vocabulary. Runs
// on the HTTP side (tokenizing is cheap and thread-safe); the engine only generates.
#include <cstdint>
#include <span>
#include <vector>

#include "core/chat/chat_render.h"
#include "core/chat/chat_template.h"
#include "core/model/model.h"
#include "server/engine_worker.h"
#include "server/openai_api.h"

namespace ember::server {

// A chat conversation as prompt ids: the template's own text (markers, BOS/EOS texts) becomes
// special tokens, message content is always plain text, so "</s>" or "<|im_start|>" typed by a
// user stays text. Adds BOS as the vocabulary says unless the template wrote one. Throws
// std::invalid_argument on an unknown role (render_chat).
std::vector<int32_t> tokenize_chat(const Tokenizer& tok, ChatTemplate chat_template,
                                   std::span<const ChatMessage> messages, std::span<const ToolDefinition> tools = {});

// The job's prompts, sampling, max_tokens, stop strings and grammar (response_format, or the tool
// call a tool_choice requires: core/chat/tool_grammar.h); the caller sets `cancelled` and the
// callbacks. Afterwards every request.prompts[i].text holds that prompt's text (for echo; prompts
// given as ids are detokenized). Throws BadRequest naming the field (e.g. a prompt longer than the
// context).
GenerationJob prepare_completion_job(CompletionRequest& request, bool chat, const Model& model,
                                     ChatTemplate chat_template, int64_t n_ctx);

}  // namespace ember::server
