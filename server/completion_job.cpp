#include "server/completion_job.h"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>

namespace ember::server {

namespace {

std::vector<int32_t> tokenize_prompt(CompletionRequest& cr, bool chat, const Tokenizer& tok,
                                     ChatTemplate chat_template) {
  if (chat) return tokenize_chat(tok, chat_template, cr.messages);
  if (cr.prompt_is_tokens) {
    // The client tokenized: its ids are the prompt as they are (no BOS added), so they must be
    // valid for this vocabulary.
    const int32_t n_vocab = tok.n_vocab();
    for (size_t i = 0; i < cr.prompt_tokens.size(); ++i) {
      const int32_t id = cr.prompt_tokens[i];
      if (id < 0 || id >= n_vocab) {
        throw BadRequest("'prompt[" + std::to_string(i) + "]' = " + std::to_string(id) +
                             " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")",
                         "prompt");
      }
    }
    return std::move(cr.prompt_tokens);
  }
  return tok.encode(cr.prompt, /*add_special=*/true, /*parse_special=*/false);
}

}  // namespace

std::vector<int32_t> tokenize_chat(const Tokenizer& tok, ChatTemplate chat_template,
                                   std::span<const ChatMessage> messages) {
  auto special_text = [&](int32_t id) { return id >= 0 ? tok.token_to_piece(id, true) : std::string(); };
  const RenderedChat rendered = render_chat(chat_template, messages, /*add_generation_prompt=*/true,
                                            special_text(tok.bos_id()), special_text(tok.eos_id()));
  std::vector<TextSegment> segments;
  segments.reserve(rendered.segments.size());
  for (const ChatSegment& s : rendered.segments) {
    segments.push_back({std::string_view(rendered.text).substr(s.offset, s.length), /*parse_special=*/!s.is_content});
  }
  // A BOS the template wrote must not be doubled.
  return tok.encode_segments(segments, /*add_special=*/!rendered.starts_with_bos);
}

GenerationJob prepare_completion_job(CompletionRequest& cr, bool chat, const Model& model,
                                     ChatTemplate chat_template, int64_t n_ctx) {
  const Tokenizer& tok = model.tokenizer();
  std::vector<int32_t> prompt = tokenize_prompt(cr, chat, tok, chat_template);
  if (prompt.empty()) throw BadRequest("the prompt is empty", chat ? "messages" : "prompt");
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt >= n_ctx) {
    throw BadRequest("the prompt (" + std::to_string(n_prompt) + " tokens) does not fit the context window of " +
                         std::to_string(n_ctx) + " tokens (at least one token must be left to generate)",
                     chat ? "messages" : "prompt");
  }
  if (chat && !cr.max_tokens_given) cr.max_tokens = std::max<int64_t>(1, n_ctx - n_prompt);
  if (n_prompt + cr.max_tokens > n_ctx) {
    throw BadRequest("the prompt (" + std::to_string(n_prompt) + " tokens) plus max_tokens (" +
                         std::to_string(cr.max_tokens) + ") exceed the context window of " + std::to_string(n_ctx) +
                         " tokens",
                     "max_tokens");
  }
  const int32_t n_vocab = tok.n_vocab();
  for (const auto& [id, bias] : cr.sampling.logit_bias) {
    if (id < 0 || id >= n_vocab) {
      throw BadRequest("'logit_bias' token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                           std::to_string(n_vocab) + ")",
                       "logit_bias");
    }
  }
  if (!cr.seed_given) cr.sampling.seed = std::random_device{}();
  try {
    validate_sampling_params(cr.sampling, n_vocab);
  } catch (const std::invalid_argument& e) {
    throw BadRequest(e.what());
  }
  GenerationJob job;
  job.prompt = std::move(prompt);
  job.sampling = cr.sampling;
  job.max_tokens = cr.max_tokens;
  job.stop = cr.stop;
  return job;
}

}  // namespace ember::server
