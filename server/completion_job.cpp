#include "server/completion_job.h"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>

#include "core/chat/tool_grammar.h"
#include "core/grammar/grammar.h"

namespace ember::server {

namespace {

std::vector<int32_t> tokenize_prompt(CompletionRequest& cr, bool chat, const Tokenizer& tok,
                                     ChatTemplate chat_template) {
  if (chat) {
    // tool_choice none: the tools are not shown, so the model is not invited to call them.
    std::span<const ToolDefinition> tools;
    if (cr.tools.active()) tools = cr.tools.tools;
    return tokenize_chat(tok, chat_template, cr.messages, tools);
  }
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

// The grammar of the tool call the request requires (or, for the generic syntax, of its two reply
// shapes); it cannot be combined with a response_format, which would constrain the same reply.
void add_tool_grammar(CompletionRequest& cr, ChatTemplate chat_template) {
  if (!cr.tools.active()) return;
  std::string gbnf;
  try {
    gbnf = tool_call_gbnf(tool_syntax(chat_template), cr.tools.tools, cr.tools.choice, cr.tools.named,
                          cr.tools.parallel);
  } catch (const std::invalid_argument& e) {
    throw BadRequest(std::string("'tools' cannot be enforced: ") + e.what(), "tools");
  }
  if (gbnf.empty()) return;
  if (!cr.grammar.gbnf.empty()) {
    throw BadRequest("'" + cr.grammar.param + "' cannot be combined with tools that constrain the reply (tool_choice "
                         "required or a named function, or a chat template without its own tool syntax); "
                         "send tool_choice \"none\" or drop '" + cr.grammar.param + "'",
                     cr.grammar.param);
  }
  cr.grammar = {std::move(gbnf), "tools"};
}

}  // namespace

std::vector<int32_t> tokenize_chat(const Tokenizer& tok, ChatTemplate chat_template,
                                   std::span<const ChatMessage> messages, std::span<const ToolDefinition> tools) {
  auto special_text = [&](int32_t id) { return id >= 0 ? tok.token_to_piece(id, true) : std::string(); };
  const RenderedChat rendered = render_chat(chat_template, messages, /*add_generation_prompt=*/true,
                                            special_text(tok.bos_id()), special_text(tok.eos_id()), tools);
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
  if (chat) add_tool_grammar(cr, chat_template);
  if (!cr.seed_given) cr.sampling.seed = std::random_device{}();
  try {
    validate_sampling_params(cr.sampling, n_vocab);
  } catch (const std::invalid_argument& e) {
    throw BadRequest(e.what());
  }
  GenerationJob job;
  if (!cr.grammar.gbnf.empty()) {
    try {
      job.grammar = grammar::Grammar::parse(cr.grammar.gbnf);
    } catch (const std::exception& e) {
      // GrammarError (syntax with line:column, limits, left recursion) or memory for a huge one.
      throw BadRequest(std::string("'") + cr.grammar.param + "': " + e.what(), cr.grammar.param);
    }
  }
  job.top_logprobs = cr.top_logprobs;
  job.choices = cr.n;
  job.prompt = std::move(prompt);
  job.sampling = cr.sampling;
  job.max_tokens = cr.max_tokens;
  job.stop = cr.stop;
  return job;
}

}  // namespace ember::server
