#include "server/completion_job.h"

#include <algorithm>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>

#include "core/chat/tool_grammar.h"
#include "core/grammar/grammar.h"

namespace ember::server {

namespace {

// A /v1/completions prompt as ids. One the client tokenized is taken as it is (no BOS added), so
// its ids must be valid for this vocabulary; its text (for echo) is their detokenization.
std::vector<int32_t> tokenize_completion_prompt(PromptInput& p, size_t index, size_t count, const Tokenizer& tok) {
  if (!p.is_tokens) return tok.encode(p.text, /*add_special=*/true, /*parse_special=*/false);
  const std::string where = count > 1 ? "prompt[" + std::to_string(index) + "]" : "prompt";
  const int32_t n_vocab = tok.n_vocab();
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    const int32_t id = p.tokens[i];
    if (id < 0 || id >= n_vocab) {
      throw BadRequest("'" + where + "[" + std::to_string(i) + "]' = " + std::to_string(id) +
                           " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")",
                       "prompt");
    }
  }
  p.text = tok.decode(p.tokens);
  return std::move(p.tokens);
}

std::vector<std::vector<int32_t>> tokenize_prompts(CompletionRequest& cr, bool chat, const Tokenizer& tok,
                                                   ChatTemplate chat_template) {
  std::vector<std::vector<int32_t>> out;
  if (chat) {
    // tool_choice none: the tools are not shown, so the model is not invited to call them.
    std::span<const ToolDefinition> tools;
    if (cr.tools.active()) tools = cr.tools.tools;
    out.push_back(tokenize_chat(tok, chat_template, cr.messages, tools));
    return out;
  }
  out.reserve(cr.prompts.size());
  for (size_t i = 0; i < cr.prompts.size(); ++i) {
    out.push_back(tokenize_completion_prompt(cr.prompts[i], i, cr.prompts.size(), tok));
  }
  return out;
}

// Checks one prompt against the context window: `where` names it for the client.
void check_prompt_fits(const std::vector<int32_t>& prompt, const std::string& where, const std::string& param,
                       int64_t max_tokens, int64_t n_ctx) {
  if (prompt.empty()) throw BadRequest(where + " is empty", param);
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt >= n_ctx) {
    throw BadRequest(where + " (" + std::to_string(n_prompt) + " tokens) does not fit the context window of " +
                         std::to_string(n_ctx) + " tokens (at least one token must be left to generate)",
                     param);
  }
  if (n_prompt + max_tokens > n_ctx) {
    throw BadRequest(where + " (" + std::to_string(n_prompt) + " tokens) plus max_tokens (" +
                         std::to_string(max_tokens) + ") exceed the context window of " + std::to_string(n_ctx) +
                         " tokens",
                     "max_tokens");
  }
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
  std::vector<std::vector<int32_t>> prompts = tokenize_prompts(cr, chat, tok, chat_template);
  if (chat && !cr.max_tokens_given) {
    cr.max_tokens = std::max<int64_t>(1, n_ctx - static_cast<int64_t>(prompts.front().size()));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string where = prompts.size() > 1 ? "prompt[" + std::to_string(i) + "]" : "the prompt";
    check_prompt_fits(prompts[i], where, chat ? "messages" : "prompt", cr.max_tokens, n_ctx);
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
  if (cr.echo && cr.top_logprobs >= 0) {
    // A BOS the server added is not part of the client's text: its log-probabilities start after it.
    const bool added_bos = !cr.prompts.front().is_tokens && tok.bos_id() >= 0 && prompts.front().front() == tok.bos_id();
    job.prompt_logprobs_from = added_bos ? 1 : 0;
  }
  job.prompt = std::move(prompts.front());
  job.later_prompts.assign(std::make_move_iterator(prompts.begin() + 1), std::make_move_iterator(prompts.end()));
  job.sampling = cr.sampling;
  job.max_tokens = cr.max_tokens;
  job.stop = cr.stop;
  return job;
}

}  // namespace ember::server
