#include "server/openai_api.h"

#include <cmath>

namespace ember::server {
namespace {

using nlohmann::json;

double number_field(const json& j, const char* name, double lo, double hi) {
  const json& v = j.at(name);
  if (!v.is_number()) throw BadRequest(std::string("'") + name + "' must be a number", name);
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    throw BadRequest(std::string("'") + name + "' must be between " + std::to_string(lo) + " and " +
                         std::to_string(hi),
                     name);
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

bool present(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && !it->is_null();  // OpenAI clients send explicit nulls for "default"
}


json parse_object(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw BadRequest("the request body is not valid JSON");
  if (!j.is_object()) throw BadRequest("the request body must be a JSON object");
  return j;
}

void parse_common(const json& j, CompletionRequest& r, const RequestLimits& limits);

}  // namespace

CompletionRequest parse_completion_request(const std::string& body, const RequestLimits& limits) {
  const json j = parse_object(body);
  CompletionRequest r;
  if (!present(j, "prompt")) throw BadRequest("'prompt' is required", "prompt");
  const json& p = j.at("prompt");
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt = p[0].get<std::string>();
  } else {
    throw BadRequest("'prompt' must be a string (or an array of one string)", "prompt");
  }
  if (r.prompt.size() > limits.max_prompt_bytes) {
    throw BadRequest("'prompt' is longer than " + std::to_string(limits.max_prompt_bytes) + " bytes", "prompt");
  }
  parse_common(j, r, limits);
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
    if (msg.role != "system" && msg.role != "developer" && msg.role != "user" && msg.role != "assistant") {
      throw BadRequest("'" + where + ".role' must be system, developer, user or assistant", where + ".role");
    }
    const json* content = m.contains("content") ? &m.at("content") : nullptr;
    if (!content || content->is_null()) {
      // allowed (e.g. an assistant turn that only made tool calls): empty text
    } else if (content->is_string()) {
      msg.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (const json& part : *content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part.at("text").is_string()) {
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
  if (present(j, "max_completion_tokens") && !present(j, "max_tokens")) {
    r.max_tokens = integer_field(j, "max_completion_tokens", 1, limits.max_tokens);
    r.max_tokens_given = true;
  }
  parse_common(j, r, limits);
  return r;
}

namespace {

void parse_common(const json& j, CompletionRequest& r, const RequestLimits& limits) {
  if (present(j, "model") && !j.at("model").is_string()) throw BadRequest("'model' must be a string", "model");
  if (present(j, "max_tokens")) {
    r.max_tokens = integer_field(j, "max_tokens", 1, limits.max_tokens);
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
  if (present(j, "n") && integer_field(j, "n", 1, 1) != 1) throw BadRequest("only n = 1 is supported", "n");
  if (present(j, "stop")) throw BadRequest("'stop' is not supported yet", "stop");
}

}  // namespace

const char* openai_finish_reason(FinishReason finish) {
  return finish == FinishReason::EndOfGeneration ? "stop" : "length";
}

json completion_response(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                         FinishReason finish, int64_t prompt_tokens, int64_t completion_tokens) {
  return json{{"id", id},
              {"object", "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array({json{{"text", text},
                                            {"index", 0},
                                            {"logprobs", nullptr},
                                            {"finish_reason", openai_finish_reason(finish)}}})},
              {"usage", json{{"prompt_tokens", prompt_tokens},
                             {"completion_tokens", completion_tokens},
                             {"total_tokens", prompt_tokens + completion_tokens}}}};
}

json completion_chunk(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                      std::optional<FinishReason> finish) {
  json choice{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (finish) choice["finish_reason"] = openai_finish_reason(*finish);
  return json{{"id", id},
              {"object", "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array({choice})}};
}

json chat_response(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                   FinishReason finish, int64_t prompt_tokens, int64_t completion_tokens) {
  return json{{"id", id},
              {"object", "chat.completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array({json{{"index", 0},
                                            {"message", json{{"role", "assistant"}, {"content", text}}},
                                            {"logprobs", nullptr},
                                            {"finish_reason", openai_finish_reason(finish)}}})},
              {"usage", json{{"prompt_tokens", prompt_tokens},
                             {"completion_tokens", completion_tokens},
                             {"total_tokens", prompt_tokens + completion_tokens}}}};
}

json chat_chunk(const std::string& id, int64_t created, const std::string& model, bool first,
                const std::optional<std::string>& text, std::optional<FinishReason> finish) {
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (text) delta["content"] = *text;
  json choice{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (finish) choice["finish_reason"] = openai_finish_reason(*finish);
  return json{{"id", id},
              {"object", "chat.completion.chunk"},
              {"created", created},
              {"model", model},
              {"choices", json::array({choice})}};
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
