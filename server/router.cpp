#include "server/router.h"

#include "server/access_gate.h"
#include "server/completion_handler.h"
#include "server/info_handlers.h"
#include "server/openai_api.h"
#include "server/tokenize_handler.h"

namespace ember::server {
namespace http = boost::beast::http;

namespace {

using Handler = void (*)(const Request&, RouteContext&, Responder&);

struct Route {
  Endpoint endpoint;  // the path, as http_metrics classifies it
  http::verb method;  // the only one allowed
  bool needs_model;   // answers 503 while the model loads
  Handler handle;
};

const Route kRoutes[] = {
    {Endpoint::Health, http::verb::get, false, handle_health},
    {Endpoint::Metrics, http::verb::get, false, handle_metrics},
    {Endpoint::Models, http::verb::get, false, handle_models},
    {Endpoint::Model, http::verb::get, false, handle_model},
    {Endpoint::ModelUnload, http::verb::post, true, handle_model_unload},
    {Endpoint::Completions, http::verb::post, true,
     [](const Request& req, RouteContext& ctx, Responder& out) { handle_completion(req, false, ctx, out); }},
    {Endpoint::ChatCompletions, http::verb::post, true,
     [](const Request& req, RouteContext& ctx, Responder& out) { handle_completion(req, true, ctx, out); }},
    {Endpoint::Tokenize, http::verb::post, true,
     [](const Request& req, RouteContext& ctx, Responder& out) { handle_tokens(req, false, ctx, out); }},
    {Endpoint::Detokenize, http::verb::post, true,
     [](const Request& req, RouteContext& ctx, Responder& out) { handle_tokens(req, true, ctx, out); }},
};

const Route* find_route(Endpoint endpoint) {
  for (const Route& r : kRoutes) {
    if (r.endpoint == endpoint) return &r;
  }
  return nullptr;
}

Response method_not_allowed(const Request& req, std::string_view path, http::verb allowed) {
  Response res = error_response(http::status::method_not_allowed,
                                "method " + std::string(req.method_string()) + " is not allowed on " +
                                    std::string(path),
                                "invalid_request_error");
  res.set(http::field::allow, http::to_string(allowed));
  return res;
}

}  // namespace

void route(const Request& req, RouteContext& ctx, Responder& out) {
  const std::string_view path = path_of(req.target());
  ctx.endpoint = endpoint_of(path);
  if (ctx.state.stopping.load()) {
    return out.send(unavailable_response("the server is shutting down", "server_shutdown", nullptr),
                    /*close=*/true);
  }
  if (!admit(req, ctx, out)) return;
  const Route* r = find_route(ctx.endpoint);
  if (!r) {
    return out.send(error_response(http::status::not_found, "no route for " + quote_excerpt(path), "invalid_request_error"));
  }
  if (req.method() != r->method) return out.send(method_not_allowed(req, path, r->method));
  // Read once: the startup model may finish loading while this request is answered.
  ctx.models = ctx.state.ready_models();
  if (r->needs_model && !ctx.models) {
    return out.send(unavailable_response("the model is still loading; retry shortly", "model_loading", "5"));
  }
  r->handle(req, ctx, out);
}

}  // namespace ember::server
