#include "server/info_handlers.h"

#include "server/openai_api.h"

namespace ember::server {
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

// The model object, marked when it is the built-in demo model so nobody mistakes its output.
json describe_model(json model, const ServerOptions& options) {
  if (options.demo_model) {
    model["owned_by"] = "ember";
    model["ember_demo"] = true;
    model["description"] =
        "Ember's built-in synthetic demo model (random weights: it proves the API works, its text is "
        "meaningless); pass -m MODEL.gguf to `ember serve` to serve a real model";
  }
  return model;
}

}  // namespace

void handle_health(const Request&, RouteContext& ctx, Responder& out) {
  if (ctx.engine) return out.send(json_response(http::status::ok, json{{"status", "ok"}}));
  out.send(json_response(http::status::service_unavailable, json{{"status", "loading"}}));
}

void handle_metrics(const Request&, RouteContext& ctx, Responder& out) {
  MetricsSnapshot m;
  m.requests = ctx.state.metrics.requests();
  m.http_active_requests = ctx.state.active_requests.load();
  if (ctx.engine) {
    m.model_loaded = true;
    m.engine = ctx.engine->metrics();
  }
  Response res;
  res.result(http::status::ok);
  res.set(http::field::content_type, kPrometheusContentType);
  res.body() = render_prometheus(m);
  out.send(std::move(res));
}

void handle_models(const Request&, RouteContext& ctx, Responder& out) {
  const ServerOptions& o = ctx.state.options;
  json list = model_list(o.model_id, ctx.state.created);
  for (auto& m : list["data"]) m = describe_model(std::move(m), o);
  out.send(json_response(http::status::ok, list));
}

void handle_model(const Request& req, RouteContext& ctx, Responder& out) {
  const ServerOptions& o = ctx.state.options;
  const std::string_view id = path_of(req.target()).substr(std::string_view("/v1/models/").size());
  if (id == o.model_id) {
    return out.send(json_response(http::status::ok, describe_model(model_object(o.model_id, ctx.state.created), o)));
  }
  out.send(error_response(http::status::not_found, "the model " + quote_excerpt(id) + " does not exist",
                          "invalid_request_error", "model", "model_not_found"));
}

}  // namespace ember::server
