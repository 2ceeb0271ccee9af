#include "server/http_message.h"

#include "server/openai_api.h"

namespace ember::server {
namespace http = boost::beast::http;

unsigned response_version(unsigned requested) { return requested < kHttp11 ? 10 : kHttp11; }

std::string_view path_of(std::string_view target) {
  const auto q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

namespace {

template <class Name>
std::optional<std::string_view> find_header(const http::fields& fields, const Name& name) {
  auto it = fields.find(name);
  if (it == fields.end()) return std::nullopt;
  return std::string_view(it->value().data(), it->value().size());
}

}  // namespace

std::optional<std::string_view> header(const http::fields& fields, http::field name) {
  return find_header(fields, name);
}

std::optional<std::string_view> header(const http::fields& fields, std::string_view name) {
  return find_header(fields, boost::beast::string_view(name.data(), name.size()));
}

std::string quote_excerpt(std::string_view value) {
  constexpr size_t kMax = 100;
  std::string out(1, '\'');
  out.append(value.substr(0, kMax));
  out += value.size() > kMax ? "...'" : "'";
  return out;
}

std::string json_text(const nlohmann::json& body) {
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Response json_response(http::status status, const nlohmann::json& body) {
  Response res;  // no version here: the connection answers in the request's (Responder::send)
  res.result(status);
  res.set(http::field::content_type, "application/json");
  res.body() = json_text(body);
  return res;
}

Response error_response(http::status status, const std::string& message, const std::string& type,
                        const std::string& param, const std::string& code) {
  return json_response(status, error_body(message, type, param, code));
}

Response unavailable_response(const std::string& message, const std::string& code, const char* retry_after) {
  Response res = error_response(http::status::service_unavailable, message, "server_error", {}, code);
  if (retry_after) res.set(http::field::retry_after, retry_after);
  return res;
}

}  // namespace ember::server
