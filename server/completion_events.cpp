#include "server/completion_events.h"

#include "core/cache/fetch_error.h"
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

void CompletionEvents::add(std::string& out, json chunk) const {
  // With include_usage every chunk carries "usage" (null until the usage chunk), as OpenAI does.
  if (shape_.include_usage && !chunk.contains("usage")) chunk["usage"] = nullptr;
  out += sse_event(chunk);
}

void CompletionEvents::add_role_chunk(std::string& out) {
  if (role_sent_) return;
  role_sent_ = true;
  add(out, chat_chunk(shape_.id, shape_.created, shape_.model, true, "", std::nullopt));
}

std::string CompletionEvents::text(std::string_view piece) {
  std::string out;
  const std::string text(piece);
  if (!shape_.chat) {
    add(out, completion_chunk(shape_.id, shape_.created, shape_.model, text, std::nullopt));
  } else {
    add_role_chunk(out);
    add(out, chat_chunk(shape_.id, shape_.created, shape_.model, false, text, std::nullopt));
  }
  return out;
}

std::string CompletionEvents::done(const GenerationStats& stats, const std::exception_ptr& error) {
  std::string out;
  const auto& s = shape_;
  if (error) {
    out += sse_event(error_body(failure_message(error), "server_error", {}, failure_code(error)));
    return out + kSseDone;
  }
  if (!s.chat) {
    add(out, completion_chunk(s.id, s.created, s.model, "", stats.finish));
  } else {
    add_role_chunk(out);
    add(out, chat_chunk(s.id, s.created, s.model, false, std::nullopt, stats.finish));
  }
  if (s.include_usage) {
    json usage_chunk = s.chat ? chat_chunk(s.id, s.created, s.model, false, std::nullopt, std::nullopt)
                              : completion_chunk(s.id, s.created, s.model, "", std::nullopt);
    usage_chunk["choices"] = json::array();
    usage_chunk["usage"] = json{{"prompt_tokens", s.prompt_tokens},
                                {"completion_tokens", stats.generated_tokens},
                                {"total_tokens", s.prompt_tokens + stats.generated_tokens}};
    add(out, std::move(usage_chunk));
  }
  return out + kSseDone;
}

Response CompletionEvents::whole_response(const std::string& text, const GenerationStats& stats,
                                          const std::exception_ptr& error) const {
  const auto& s = shape_;
  if (error) {
    return error_response(http::status::internal_server_error, failure_message(error), "server_error", {},
                          failure_code(error));
  }
  return json_response(http::status::ok,
                       s.chat ? chat_response(s.id, s.created, s.model, text, stats.finish, s.prompt_tokens,
                                              stats.generated_tokens)
                              : completion_response(s.id, s.created, s.model, text, stats.finish,
                                                    s.prompt_tokens, stats.generated_tokens));
}

}  // namespace ember::server
