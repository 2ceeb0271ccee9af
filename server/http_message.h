#pragma once
// The request and response types every handler shares, and the small helpers that read a request
// or build a JSON response. Responses are built without a version, Server, CORS or keep-alive
// fields: the connection that writes them sets those (see Responder::send), so no handler can
// answer in the wrong HTTP version.
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace ember::server {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;

// HTTP/1.1 in Beast's encoding (major * 10 + minor): what a response speaks when the request's
// version is unknown (the parser stopped before its request line).
inline constexpr unsigned kHttp11 = 11;

// The version a response to a request of `requested` speaks: 1.0 to 1.0 (and older) clients,
// which know neither chunked bodies nor persistent connections by default, 1.1 otherwise.
unsigned response_version(unsigned requested);

// The target without its query string.
std::string_view path_of(std::string_view target);

std::optional<std::string_view> header(const boost::beast::http::fields& fields, boost::beast::http::field name);
std::optional<std::string_view> header(const boost::beast::http::fields& fields, std::string_view name);

// A client-supplied value quoted in an error message, cut so the message stays readable.
std::string quote_excerpt(std::string_view value);

// Every JSON body goes out through here: text from the client (a path, a model id) may be
// invalid UTF-8, which nlohmann's dump() would throw on.
std::string json_text(const nlohmann::json& body);

Response json_response(boost::beast::http::status status, const nlohmann::json& body);
// {"error": {...}} (server/openai_api.h's error_body).
Response error_response(boost::beast::http::status status, const std::string& message, const std::string& type,
                        const std::string& param = {}, const std::string& code = {});
// 503 with a "server_error" body and, when given, Retry-After (seconds).
Response unavailable_response(const std::string& message, const std::string& code, const char* retry_after);

}  // namespace ember::server
