#include "server/completion_events.h"

#include <algorithm>

#include "core/cache/fetch_error.h"
#include "server/logprobs_json.h"
#include "server/openai_api.h"

namespace ember::server {
using nlohmann::json;
namespace http = boost::beast::http;

std::string failure_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
  }
  return "generation failed";
}

// A failed read of the model (the neuron cache under a memory budget: I/O error, truncated pack)
// is worth telling apart from a fault of the request.
std::string failure_code(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const cache::FetchError&) {
    return "model_read_failed";
  } catch (...) {
  }
  return {};
}

std::string shutdown_events() {
  return sse_event(error_body("the server is shutting down", "server_error", {}, "server_shutdown")) + kSseDone;
}

void CompletionEvents::begin_choice() {
  ++choice_;
  role_sent_ = false;
  echo_sent_ = false;
  text_offset_ = 0;
  pending_logprobs_.clear();
  if (shape_.tool_syntax) tools_.emplace(*shape_.tool_syntax);
}

void CompletionEvents::add(std::string& out, json chunk) const {
  json& choices = chunk["choices"];
  if (!choices.empty()) choices[0]["index"] = choice_;
  // With include_usage every chunk carries "usage" (null until the usage chunk), as OpenAI does.
  if (shape_.include_usage && !chunk.contains("usage")) chunk["usage"] = nullptr;
  out += sse_event(chunk);
}

void CompletionEvents::add_role_chunk(std::string& out) {
  if (role_sent_) return;
  role_sent_ = true;
  add(out, chat_chunk(shape_.id, shape_.created, shape_.model, true, "", std::nullopt));
}

json CompletionEvents::take_logprobs() {
  if (!shape_.logprobs) return nullptr;
  json out = shape_.chat ? chat_logprobs(pending_logprobs_) : completion_logprobs(pending_logprobs_, text_offset_);
  for (const TokenLogprobs& t : pending_logprobs_) text_offset_ += static_cast<int64_t>(t.chosen.token.size());
  pending_logprobs_.clear();
  return out;
}

json CompletionEvents::usage(int64_t completion_tokens) const {
  json u{{"prompt_tokens", shape_.prompt_tokens},
         {"completion_tokens", completion_tokens},
         {"total_tokens", shape_.prompt_tokens + completion_tokens}};
  u["prompt_tokens_details"] = json{{"cached_tokens", cached_prompt_tokens_}};
  return u;
}

void CompletionEvents::name_calls(std::vector<ToolCall>& calls, int choice) const {
  const size_t dash = shape_.id.rfind('-');
  const std::string number = dash == std::string::npos ? shape_.id : shape_.id.substr(dash + 1);
  const std::string prefix = "call_" + number + "_" + (choice > 0 ? std::to_string(choice) + "_" : "");
  for (size_t i = 0; i < calls.size(); ++i) calls[i].id = prefix + std::to_string(i);
}

namespace {

// A reply whose calls are complete finishes with "tool_calls"; one cut by max_tokens keeps "length"
// (a call it cut is text: tool_calls.h).
bool finishes_with_calls(const ToolReply& reply, FinishReason finish) {
  return !reply.calls.empty() && (finish == FinishReason::EndOfGeneration || finish == FinishReason::StopSequence);
}

}  // namespace

void CompletionEvents::add_held_reply(std::string& out, ToolReply reply) {
  name_calls(reply.calls, choice_);
  if (!reply.content.empty()) {
    add_role_chunk(out);
    add(out, chat_chunk(shape_.id, shape_.created, shape_.model, false, reply.content, std::nullopt, take_logprobs()));
  }
  for (size_t i = 0; i < reply.calls.size(); ++i) {
    add_role_chunk(out);
    json chunk = chat_chunk(shape_.id, shape_.created, shape_.model, false, std::nullopt, std::nullopt,
                            i == 0 && !pending_logprobs_.empty() ? take_logprobs() : json());
    chunk["choices"][0]["delta"]["tool_calls"] = tool_calls_json({reply.calls[i]}, i, /*with_index=*/true);
    add(out, std::move(chunk));
  }
}

std::string CompletionEvents::text(std::string_view piece) {
  std::string out;
  std::string text(piece);
  if (tools_) {
    text = tools_->push(piece);
    if (text.empty()) return out;  // held (a possible call): its tokens' logprobs wait with it
  }
  if (!shape_.chat) {
    add_echo(out);
    add(out, completion_chunk(shape_.id, shape_.created, shape_.model, text, std::nullopt, take_logprobs()));
  } else {
    add_role_chunk(out);
    add(out, chat_chunk(shape_.id, shape_.created, shape_.model, false, text, std::nullopt, take_logprobs()));
  }
  return out;
}

void CompletionEvents::add_finish(std::string& out, const GenerationStats& stats) {
  const auto& s = shape_;
  if (choice_ % s.choices_per_prompt == 0) cached_prompt_tokens_ += stats.cached_prompt_tokens;
  completion_tokens_ += stats.generated_tokens;
  bool with_calls = false;
  if (tools_) {
    ToolReply reply = tools_->finish();
    with_calls = finishes_with_calls(reply, stats.finish);
    add_held_reply(out, std::move(reply));
  }
  // Tokens whose text was held back (a stop string's prefix, say) still report their logprobs.
  const bool pending = !pending_logprobs_.empty();
  if (!s.chat) {
    add_echo(out);  // max_tokens 0, or nothing generated
    add(out, completion_chunk(s.id, s.created, s.model, "", stats.finish, pending ? take_logprobs() : json()));
  } else {
    add_role_chunk(out);
    json last = chat_chunk(s.id, s.created, s.model, false, std::nullopt, stats.finish, pending ? take_logprobs() : json());
    if (with_calls) last["choices"][0]["finish_reason"] = "tool_calls";
    add(out, std::move(last));
  }
}

const std::string& CompletionEvents::echo_text() const {
  return shape_.echo[static_cast<size_t>(choice_ / shape_.choices_per_prompt)];
}

void CompletionEvents::add_echo(std::string& out) {
  if (shape_.echo.empty() || echo_sent_) return;
  echo_sent_ = true;
  json logprobs = shape_.logprobs ? completion_logprobs(prompt_logprobs_, 0) : json();
  text_offset_ = static_cast<int64_t>(echo_text().size());  // the generated tokens' offsets follow it
  add(out, completion_chunk(shape_.id, shape_.created, shape_.model, echo_text(), std::nullopt, std::move(logprobs)));
}

std::string CompletionEvents::choice_end(const GenerationStats& stats) {
  std::string out;
  add_finish(out, stats);
  begin_choice();
  return out;
}

std::string CompletionEvents::done(const GenerationStats& stats, const std::exception_ptr& error) {
  std::string out;
  const auto& s = shape_;
  if (error) {
    out += sse_event(error_body(failure_message(error), "server_error", {}, failure_code(error)));
    return out + kSseDone;
  }
  add_finish(out, stats);
  if (s.include_usage) {
    json usage_chunk = s.chat ? chat_chunk(s.id, s.created, s.model, false, std::nullopt, std::nullopt)
                              : completion_chunk(s.id, s.created, s.model, "", std::nullopt);
    usage_chunk["choices"] = json::array();
    usage_chunk["usage"] = usage(completion_tokens_);
    add(out, std::move(usage_chunk));
  }
  return out + kSseDone;
}

json CompletionEvents::choice_json(ChoiceResult& c, int index) {
  const auto& s = shape_;
  choice_ = index;
  const bool echo = !s.chat && !s.echo.empty();
  pending_logprobs_ = std::move(c.logprobs);
  text_offset_ = echo ? static_cast<int64_t>(echo_text().size()) : 0;
  json logprobs = take_logprobs();
  json body;
  if (echo) {
    if (s.logprobs) logprobs = joined_completion_logprobs(completion_logprobs(prompt_logprobs_, 0), logprobs);
    body = completion_response(s.id, s.created, s.model, echo_text() + c.text, c.stats.finish, 0, 0, logprobs);
  } else if (!s.chat) {
    body = completion_response(s.id, s.created, s.model, c.text, c.stats.finish, 0, 0, logprobs);
  } else if (!s.tool_syntax) {
    body = chat_response(s.id, s.created, s.model, c.text, c.stats.finish, 0, 0, logprobs);
  } else {
    ToolReply reply = parse_tool_reply(*s.tool_syntax, c.text);
    name_calls(reply.calls, index);
    body = chat_response(s.id, s.created, s.model, reply.content, c.stats.finish, 0, 0, logprobs);
    if (!reply.calls.empty()) {
      json& choice = body["choices"][0];
      if (reply.content.empty()) choice["message"]["content"] = nullptr;  // OpenAI: a reply that only calls
      choice["message"]["tool_calls"] = tool_calls_json(reply.calls, 0, /*with_index=*/false);
      if (finishes_with_calls(reply, c.stats.finish)) choice["finish_reason"] = "tool_calls";
    }
  }
  json choice = std::move(body["choices"][0]);
  choice["index"] = index;
  return choice;
}

Response CompletionEvents::whole_response(std::vector<ChoiceResult> choices, const std::exception_ptr& error) {
  const auto& s = shape_;
  if (error) {
    return error_response(http::status::internal_server_error, failure_message(error), "server_error", {},
                          failure_code(error));
  }
  json body = s.chat ? chat_response(s.id, s.created, s.model, "", FinishReason::Length, 0, 0)
                     : completion_response(s.id, s.created, s.model, "", FinishReason::Length, 0, 0);
  body["choices"] = json::array();
  int64_t completion_tokens = 0;
  const auto per_prompt = static_cast<size_t>(s.choices_per_prompt);
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i % per_prompt == 0) {
      cached_prompt_tokens_ += choices[i].stats.cached_prompt_tokens;
      prompt_logprobs_ = std::move(choices[i].prompt_logprobs);
    }
    completion_tokens += choices[i].stats.generated_tokens;
    body["choices"].push_back(choice_json(choices[i], static_cast<int>(i)));
  }
  body["usage"] = usage(completion_tokens);
  return json_response(http::status::ok, body);
}

}  // namespace ember::server
