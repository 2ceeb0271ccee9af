#include "server/access_gate.h"

#include "server/access_control.h"
#include "server/openai_api.h"

namespace ember::server {
namespace http = boost::beast::http;

std::string allowed_cors_origin(const http::fields& fields, const ServerOptions& options) {
  const auto origin = header(fields, http::field::origin);
  if (origin && origin_allowed(*origin, options.cors_origins)) return std::string(*origin);
  return {};
}

namespace {

Response origin_refused(std::string_view origin, const char* what) {
  return error_response(http::status::forbidden,
                        std::string(what) + quote_excerpt(origin) +
                            " are not allowed (the server's cors_origins does not list it)",
                        "invalid_request_error", {}, "cors_origin_not_allowed");
}

// 204 with what the browser may send, or 403 for an origin that may not call at all.
Response preflight_response(const Request& req, const RouteContext& ctx) {
  if (ctx.cors_origin.empty()) {
    return origin_refused(header(req, http::field::origin).value_or(""), "cross-origin requests from ");
  }
  Response res;
  res.result(http::status::no_content);
  res.set(http::field::access_control_allow_methods, kCorsAllowMethods);
  res.set(http::field::access_control_allow_headers,
          preflight_allow_headers(header(req, http::field::access_control_request_headers)));
  res.set(http::field::access_control_max_age, kCorsMaxAgeSeconds);
  return res;
}

}  // namespace

bool admit(const Request& req, RouteContext& ctx, Responder& out) {
  const ServerOptions& o = ctx.state.options;
  if (ctx.check_host) {
    const auto host = header(req, http::field::host);
    if (!host_header_allowed(host, o.allowed_hosts)) {
      out.send(error_response(http::status::forbidden,
                              "the Host header " + quote_excerpt(host.value_or("")) +
                                  " is not allowed: this server is bound to loopback and answers only to "
                                  "localhost names and addresses (add the name to allowed_hosts to accept it)",
                              "invalid_request_error", {}, "host_not_allowed"));
      return false;
    }
  }
  ctx.cors_origin = allowed_cors_origin(req, o);
  const auto origin = header(req, http::field::origin);
  if (req.method() == http::verb::options && origin) {
    out.send(preflight_response(req, ctx));
    return false;
  }
  if (!request_origin_allowed(origin, header(req, http::field::host), o.cors_origins)) {
    out.send(origin_refused(origin.value_or(""), "requests from the web page at "));
    return false;
  }
  if (ctx.endpoint == Endpoint::Health && req.method() == http::verb::get) return true;
  if (o.api_keys.empty()) return true;
  const auto presented = presented_api_keys(header(req, http::field::authorization), header(req, "X-Api-Key"));
  if (api_key_accepted(presented, o.api_keys)) return true;
  Response res = error_response(http::status::unauthorized,
                                presented.empty()
                                    ? "an API key is required: send 'Authorization: Bearer KEY' or 'X-Api-Key: KEY'"
                                    : "the API key is not valid",
                                "invalid_request_error", {}, "invalid_api_key");
  res.set(http::field::www_authenticate, "Bearer");
  out.send(std::move(res));
  return false;
}

}  // namespace ember::server
