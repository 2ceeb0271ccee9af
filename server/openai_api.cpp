#include "server/openai_api.h"
#include "server/json_fields.h"
#include "server/keep_alive.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

namespace ember::server {
namespace {

using nlohmann::json;

std::string num(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

double number_field(const json& j, const char* name, double lo, double hi) {
  const json& v = j.at(name);
  if (!v.is_number()) throw BadRequest(std::string("'") + name + "' must be a number", name);
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    throw BadRequest(std::string("'") + name + "' must be between " + num(lo) + " and " + num(hi), name);
  }
  return d;
}

int64_t integer_field(const json& j, const char* name, int64_t lo, int64_t hi) {
  const json& v = j.at(name);
  if (!v.is_number_integer()) throw BadRequest(std::string("'") + name + "' must be an integer", name);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    throw BadRequest(std::string("'") + name + "' must be at most " + std::to_string(hi), name);
  }
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) {
    throw BadRequest(std::string("'") + name + "' must be between " + std::to_string(lo) + " and " +
                         std::to_string(hi),
                     name);
  }
  return i;
}



json parse_object(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw BadRequest("the request body is not valid JSON");
  if (!j.is_object()) throw BadRequest("the request body must be a JSON object");
  return j;
}

void parse_common(const json& j, const std::string& body, CompletionRequest& r, const RequestLimits& limits);
void parse_prompt(const json& p, CompletionRequest& r, const RequestLimits& limits);

}  // namespace

CompletionRequest parse_completion_request(const std::string& body, const RequestLimits& limits) {
  const json j = parse_object(body);
  CompletionRequest r;
  if (!present(j, "prompt")) throw BadRequest("'prompt' is required", "prompt");
  parse_prompt(j.at("prompt"), r, limits);
  parse_common(j, body, r, limits);
  if (present(j, "echo")) {
    if (!j.at("echo").is_boolean()) throw BadRequest("'echo' must be a boolean", "echo");
    r.echo = j.at("echo").get<bool>();
  }
  if (r.max_tokens == 0 && !r.echo) {
    throw BadRequest("'max_tokens' must be at least 1 (0 only with echo, to score the prompt)", "max_tokens");
  }
  const size_t choices = r.prompts.size() * static_cast<size_t>(r.n);
  if (choices > static_cast<size_t>(limits.max_choices)) {
    throw BadRequest(std::to_string(r.prompts.size()) + " prompts x n = " + std::to_string(r.n) + " are " +
                         std::to_string(choices) + " choices, more than " + std::to_string(limits.max_choices),
                     "n");
  }
  // A completion has no assistant message to carry calls in: a 400 rather than tools ignored.
  if (present(j, "tools") && !(j.at("tools").is_array() && j.at("tools").empty())) {
    throw BadRequest("'tools' is a /v1/chat/completions field", "tools");
  }
  if (present(j, "tool_choice") && j.at("tool_choice") != "none") {
    throw BadRequest("'tool_choice' is a /v1/chat/completions field", "tool_choice");
  }
  return r;
}

CompletionRequest parse_chat_request(const std::string& body, const RequestLimits& limits) {
  const json j = parse_object(body);
  CompletionRequest r;
  if (!present(j, "messages")) throw BadRequest("'messages' is required", "messages");
  const json& ms = j.at("messages");
  if (!ms.is_array() || ms.empty()) throw BadRequest("'messages' must be a non-empty array", "messages");
  if (ms.size() > limits.max_messages) {
    throw BadRequest("'messages' has more than " + std::to_string(limits.max_messages) + " entries", "messages");
  }
  size_t total = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const json& m = ms[i];
    if (!m.is_object()) throw BadRequest("'" + where + "' must be an object", where);
    if (!present(m, "role") || !m.at("role").is_string()) {
      throw BadRequest("'" + where + ".role' must be a string", where + ".role");
    }
    ChatMessage msg{m.at("role").get<std::string>(), {}};
    if (msg.role != "system" && msg.role != "developer" && msg.role != "user" && msg.role != "assistant" &&
        msg.role != "tool") {
      throw BadRequest("'" + where + ".role' must be system, developer, user, assistant or tool", where + ".role");
    }
    if (msg.role == "assistant" && present(m, "tool_calls")) {
      msg.tool_calls = parse_message_tool_calls(m.at("tool_calls"), where, limits.tools);
      for (const ToolCall& c : msg.tool_calls) total += c.id.size() + c.name.size() + c.arguments.size();
    }
    if (msg.role == "tool") {
      if (!present(m, "tool_call_id") || !m.at("tool_call_id").is_string()) {
        throw BadRequest("'" + where + ".tool_call_id' must be the id of the call this is the result of",
                         where + ".tool_call_id");
      }
      msg.tool_call_id = m.at("tool_call_id").get<std::string>();
      if (present(m, "name") && m.at("name").is_string()) msg.name = m.at("name").get<std::string>();
      total += msg.tool_call_id.size() + msg.name.size();
    }
    const json* content = m.contains("content") ? &m.at("content") : nullptr;
    if (!content || content->is_null()) {
      // allowed (e.g. an assistant turn that only made tool calls): empty text
    } else if (content->is_string()) {
      msg.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (const json& part : *content) {
        // Checked before any read that could throw: a non-string "type" is the client's mistake.
        const bool text_part = part.is_object() && part.contains("type") && part.at("type").is_string() &&
                               part.at("type").get<std::string>() == "text" && part.contains("text") &&
                               part.at("text").is_string();
        if (!text_part) {
          throw BadRequest("'" + where + ".content' parts must be {\"type\":\"text\",\"text\":...}",
                           where + ".content");
        }
        msg.content += part.at("text").get<std::string>();
      }
    } else {
      throw BadRequest("'" + where + ".content' must be a string or an array of text parts", where + ".content");
    }
    total += msg.content.size();
    if (total > limits.max_prompt_bytes) {
      throw BadRequest("the messages are longer than " + std::to_string(limits.max_prompt_bytes) + " bytes",
                       "messages");
    }
    r.messages.push_back(std::move(msg));
  }
  parse_common(j, body, r, limits);
  if (present(j, "echo") && j.at("echo") != false) {
    throw BadRequest("'echo' is a /v1/completions field (a chat reply does not repeat the messages)", "echo");
  }
  if (r.max_tokens == 0) throw BadRequest("'max_tokens' must be at least 1", "max_tokens");
  r.tools = parse_tool_request(j, body, limits.tools);
  // OpenAI's rule: alternatives are only listed for a request that asked for logprobs.
  if (present(j, "top_logprobs") && r.top_logprobs < 0) {
    throw BadRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  }
  return r;
}

namespace {

// A token id in a prompt: range-checked against the vocabulary later (prepare_completion_job), but
// it must be a non-negative 32-bit integer to be stored at all.
int32_t token_id(const json& v, const std::string& where) {
  if (!v.is_number_integer()) throw BadRequest("'" + where + "' must be an integer token id", "prompt");
  if (v.is_number_unsigned() ? v.get<uint64_t>() > INT32_MAX : (v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)) {
    throw BadRequest("'" + where + "' is not a valid token id", "prompt");
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

std::vector<int32_t> parse_token_prompt(const json& ids, const std::string& where, size_t& total_tokens,
                                        const RequestLimits& limits) {
  if (ids.empty()) throw BadRequest("'" + where + "' is empty", "prompt");
  total_tokens += ids.size();
  if (total_tokens > limits.max_prompt_tokens) {
    throw BadRequest("'prompt' has more than " + std::to_string(limits.max_prompt_tokens) + " tokens", "prompt");
  }
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) out.push_back(token_id(ids[i], where + "[" + std::to_string(i) + "]"));
  return out;
}

// OpenAI accepts a string, an array of strings, an array of token ids or an array of token-id
// arrays; each string or id array is one prompt, answered by its own n choices. The limits hold
// for all prompts together; the number of prompts is checked against n in parse_completion_request.
void parse_prompt(const json& p, CompletionRequest& r, const RequestLimits& limits) {
  const char* kShape = "'prompt' must be a string, an array of strings, an array of token ids or an array of "
                       "token-id arrays";
  size_t total_bytes = 0;
  size_t total_tokens = 0;
  auto add_text = [&](const json& v, const std::string& where) {
    if (!v.is_string()) throw BadRequest("'" + where + "' must be a string (every prompt of the array)", "prompt");
    total_bytes += v.get_ref<const std::string&>().size();
    if (total_bytes > limits.max_prompt_bytes) {
      throw BadRequest("'prompt' is longer than " + std::to_string(limits.max_prompt_bytes) + " bytes", "prompt");
    }
    r.prompts.push_back({v.get<std::string>(), {}, false});
  };
  auto add_tokens = [&](const json& ids, const std::string& where) {
    if (!ids.is_array()) throw BadRequest("'" + where + "' must be an array of token ids (every prompt of the array)",
                                          "prompt");
    r.prompts.push_back({{}, parse_token_prompt(ids, where, total_tokens, limits), true});
  };
  if (p.is_string()) return add_text(p, "prompt");
  if (!p.is_array() || p.empty()) throw BadRequest(kShape, "prompt");
  if (p[0].is_number()) return add_tokens(p, "prompt");
  if (!p[0].is_string() && !p[0].is_array()) throw BadRequest(kShape, "prompt");
  // Bounded before anything is copied: the request's choices (prompts x n) are checked later.
  if (p.size() > static_cast<size_t>(limits.max_choices)) {
    throw BadRequest("'prompt' holds more than " + std::to_string(limits.max_choices) + " prompts", "prompt");
  }
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string where = "prompt[" + std::to_string(i) + "]";
    if (p[0].is_string()) {
      add_text(p[i], where);
    } else {
      add_tokens(p[i], where);
    }
  }
}

void parse_stop(const json& v, CompletionRequest& r, const RequestLimits& limits) {
  auto add = [&](const json& s, const std::string& where) {
    if (!s.is_string()) throw BadRequest("'" + where + "' must be a string", "stop");
    std::string text = s.get<std::string>();
    if (text.empty()) throw BadRequest("'" + where + "' must not be empty", "stop");
    if (text.size() > limits.max_stop_bytes) {
      throw BadRequest("'" + where + "' is longer than " + std::to_string(limits.max_stop_bytes) + " bytes", "stop");
    }
    r.stop.push_back(std::move(text));
  };
  if (v.is_string()) return add(v, "stop");
  if (!v.is_array()) throw BadRequest("'stop' must be a string or an array of strings", "stop");
  if (v.size() > limits.max_stop_strings) {
    throw BadRequest("'stop' has more than " + std::to_string(limits.max_stop_strings) + " strings", "stop");
  }
  for (size_t i = 0; i < v.size(); ++i) add(v[i], "stop[" + std::to_string(i) + "]");
}

// Keys are token ids as decimal strings ("50256"); the ids are checked against the vocabulary in
// prepare_completion_job. OpenAI's -100 means "never": it becomes -inf, which the sampler treats as
// a ban (a finite -100 can still win when every other logit is lower).
void parse_logit_bias(const json& v, CompletionRequest& r, const RequestLimits& limits) {
  if (!v.is_object()) throw BadRequest("'logit_bias' must be an object mapping token ids to numbers", "logit_bias");
  if (v.size() > limits.max_logit_bias) {
    throw BadRequest("'logit_bias' has more than " + std::to_string(limits.max_logit_bias) + " entries", "logit_bias");
  }
  r.sampling.logit_bias.clear();
  r.sampling.logit_bias.reserve(v.size());
  for (const auto& [key, value] : v.items()) {
    const std::string where = "logit_bias[\"" + key.substr(0, 32) + "\"]";
    int64_t id = 0;
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) id = std::stoll(key);
    if (!digits || id > INT32_MAX) throw BadRequest("'" + where + "': the key must be a token id", "logit_bias");
    if (!value.is_number()) throw BadRequest("'" + where + "' must be a number", "logit_bias");
    const double bias = value.get<double>();
    if (!std::isfinite(bias) || bias < -100 || bias > 100) {
      throw BadRequest("'" + where + "' must be between -100 and 100", "logit_bias");
    }
    r.sampling.logit_bias.emplace_back(static_cast<int32_t>(id),
                                       bias <= -100 ? -std::numeric_limits<float>::infinity() : static_cast<float>(bias));
  }
}

// Fields of the OpenAI (and llama.cpp) API that Ember does not implement yet. A caller that sets
// one expects its effect (JSON output, tool calls, log-probabilities): answering with plain prose
// would be a silent lie, so anything other than the field's default is a 400 naming it.
void reject_unsupported(const json& j) {
  auto refuse = [](const std::string& field, const std::string& why) {
    throw BadRequest("'" + field + "' is not supported by this server yet (" + why + ")", field);
  };
  if (present(j, "functions")) refuse("functions", "the deprecated function fields: use 'tools'");
  if (present(j, "function_call") && j.at("function_call") != "none") {
    refuse("function_call", "the deprecated function fields: use 'tool_choice'");
  }
  if (present(j, "n_probs") && j.at("n_probs") != 0) refuse("n_probs", "no log-probabilities");
  if (present(j, "suffix") && j.at("suffix") != "") refuse("suffix", "no fill-in-the-middle");
  if (present(j, "best_of") && j.at("best_of") != 1) refuse("best_of", "one candidate per request");
  if (present(j, "audio")) refuse("audio", "text only");
  if (present(j, "modalities") && j.at("modalities") != json::array({"text"})) refuse("modalities", "text only");
}

// chat: `logprobs` a boolean, `top_logprobs` 0..max; completions: `logprobs` 0..max alternatives.
void parse_logprobs(const json& j, CompletionRequest& r, const RequestLimits& limits) {
  const int max = limits.max_top_logprobs;
  if (present(j, "logprobs")) {
    const json& v = j.at("logprobs");
    if (v.is_boolean()) {
      if (v.get<bool>()) r.top_logprobs = 0;
    } else if (v.is_number_integer()) {
      r.top_logprobs = static_cast<int>(integer_field(j, "logprobs", 0, max));
    } else {
      throw BadRequest("'logprobs' must be a boolean (chat) or an integer (completions)", "logprobs");
    }
  }
  if (present(j, "top_logprobs")) {
    const int top = static_cast<int>(integer_field(j, "top_logprobs", 0, max));
    if (r.top_logprobs >= 0) r.top_logprobs = top;
  }
}

void parse_common(const json& j, const std::string& body, CompletionRequest& r, const RequestLimits& limits) {
  reject_unsupported(j);
  r.grammar = parse_output_grammar(j, body, limits.output);
  parse_logprobs(j, r, limits);
  if (present(j, "model")) {
    if (!j.at("model").is_string()) throw BadRequest("'model' must be a string", "model");
    r.model = j.at("model").get<std::string>();
  }
  if (present(j, "keep_alive")) {
    try {
      r.keep_alive = parse_keep_alive(j.at("keep_alive"));
    } catch (const std::invalid_argument& e) {
      throw BadRequest(std::string("'keep_alive' ") + e.what(), "keep_alive");
    }
  }
  // max_completion_tokens is the newer name (both endpoints); max_tokens wins when both are sent,
  // but both must be valid.
  if (present(j, "max_completion_tokens")) {
    r.max_tokens = integer_field(j, "max_completion_tokens", 0, limits.max_tokens);
    r.max_tokens_given = true;
  }
  if (present(j, "max_tokens")) {
    r.max_tokens = integer_field(j, "max_tokens", 0, limits.max_tokens);
    r.max_tokens_given = true;
  }
  if (present(j, "temperature")) r.sampling.temperature = static_cast<float>(number_field(j, "temperature", 0, 2));
  if (present(j, "top_p")) r.sampling.top_p = static_cast<float>(number_field(j, "top_p", 0, 1));
  if (present(j, "top_k")) r.sampling.top_k = static_cast<int32_t>(integer_field(j, "top_k", 0, 1 << 24));
  if (present(j, "min_p")) r.sampling.min_p = static_cast<float>(number_field(j, "min_p", 0, 1));
  if (present(j, "presence_penalty")) {
    r.sampling.presence_penalty = static_cast<float>(number_field(j, "presence_penalty", -2, 2));
  }
  if (present(j, "frequency_penalty")) {
    r.sampling.frequency_penalty = static_cast<float>(number_field(j, "frequency_penalty", -2, 2));
  }
  if (present(j, "repeat_penalty")) {
    const double p = number_field(j, "repeat_penalty", 0, 10);
    if (p <= 0) throw BadRequest("'repeat_penalty' must be greater than 0 (1 = off)", "repeat_penalty");
    r.sampling.repeat_penalty = static_cast<float>(p);
  }
  if (present(j, "logit_bias")) parse_logit_bias(j.at("logit_bias"), r, limits);
  if (present(j, "seed")) {
    const json& s = j.at("seed");
    if (!s.is_number_integer()) throw BadRequest("'seed' must be an integer", "seed");
    r.sampling.seed = s.is_number_unsigned() ? s.get<uint64_t>() : static_cast<uint64_t>(s.get<int64_t>());
    r.seed_given = true;
  }
  if (present(j, "stream")) {
    if (!j.at("stream").is_boolean()) throw BadRequest("'stream' must be a boolean", "stream");
    r.stream = j.at("stream").get<bool>();
  }
  if (present(j, "stream_options")) {
    const json& so = j.at("stream_options");
    if (!so.is_object()) throw BadRequest("'stream_options' must be an object", "stream_options");
    if (!r.stream) throw BadRequest("'stream_options' is only allowed when 'stream' is true", "stream_options");
    if (present(so, "include_usage")) {
      if (!so.at("include_usage").is_boolean()) {
        throw BadRequest("'stream_options.include_usage' must be a boolean", "stream_options.include_usage");
      }
      r.include_usage = so.at("include_usage").get<bool>();
    }
  }
  if (present(j, "n")) r.n = static_cast<int>(integer_field(j, "n", 1, limits.max_choices));
  if (present(j, "stop")) parse_stop(j.at("stop"), r, limits);
  // `user` is accepted and ignored (it is only a label for the provider's abuse monitoring).
}

}  // namespace

const char* openai_finish_reason(FinishReason finish) {
  switch (finish) {
    case FinishReason::EndOfGeneration:
    case FinishReason::StopSequence: return "stop";
    case FinishReason::Length:
    case FinishReason::Cancelled: break;  // a cancelled stream has no reader; "length" keeps the enum closed
  }
  return "length";
}

json completion_response(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                         FinishReason finish, int64_t prompt_tokens, int64_t completion_tokens, const json& logprobs) {
  return json{{"id", id},
              {"object", "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array({json{{"text", text},
                                            {"index", 0},
                                            {"logprobs", logprobs},
                                            {"finish_reason", openai_finish_reason(finish)}}})},
              {"usage", json{{"prompt_tokens", prompt_tokens},
                             {"completion_tokens", completion_tokens},
                             {"total_tokens", prompt_tokens + completion_tokens}}}};
}

json completion_chunk(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                      std::optional<FinishReason> finish, const json& logprobs) {
  json choice{{"text", text}, {"index", 0}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
  if (finish) choice["finish_reason"] = openai_finish_reason(*finish);
  return json{{"id", id},
              {"object", "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array({choice})}};
}

json chat_response(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                   FinishReason finish, int64_t prompt_tokens, int64_t completion_tokens, const json& logprobs) {
  return json{{"id", id},
              {"object", "chat.completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array({json{{"index", 0},
                                            {"message", json{{"role", "assistant"}, {"content", text}}},
                                            {"logprobs", logprobs},
                                            {"finish_reason", openai_finish_reason(finish)}}})},
              {"usage", json{{"prompt_tokens", prompt_tokens},
                             {"completion_tokens", completion_tokens},
                             {"total_tokens", prompt_tokens + completion_tokens}}}};
}

json chat_chunk(const std::string& id, int64_t created, const std::string& model, bool first,
                const std::optional<std::string>& text, std::optional<FinishReason> finish, const json& logprobs) {
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (text) delta["content"] = *text;
  json choice{{"index", 0}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
  if (finish) choice["finish_reason"] = openai_finish_reason(*finish);
  return json{{"id", id},
              {"object", "chat.completion.chunk"},
              {"created", created},
              {"model", model},
              {"choices", json::array({choice})}};
}

json tool_calls_json(const std::vector<ToolCall>& calls, size_t first_index, bool with_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call{{"id", calls[i].id},
              {"type", "function"},
              {"function", json{{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) call["index"] = first_index + i;
    out.push_back(std::move(call));
  }
  return out;
}

json model_object(const std::string& id, int64_t created) {
  return json{{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "ember"}};
}

json model_list(const std::string& id, int64_t created) {
  return json{{"object", "list"}, {"data", json::array({model_object(id, created)})}};
}

json error_body(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  return json{{"error", json{{"message", message},
                             {"type", type},
                             {"param", param.empty() ? json(nullptr) : json(param)},
                             {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

std::string sse_event(const json& payload) {
  // Invalid UTF-8 from the model becomes U+FFFD rather than an exception mid-stream.
  return "data: " + payload.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace ember::server
