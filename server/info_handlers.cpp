#include "server/info_handlers.h"

#include "server/model_lease.h"
#include "server/openai_api.h"

namespace ember::server {
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

// The model object, marked when it is the built-in demo model so nobody mistakes its output.
json describe_model(json model, bool demo) {
  if (demo) {
    model["owned_by"] = "ember";
    model["ember_demo"] = true;
    model["description"] =
        "Ember's built-in synthetic demo model (random weights: it proves the API works, its text is "
        "meaningless); pass -m MODEL.gguf to `ember serve` to serve a real model";
  }
  return model;
}

// A catalog model with what the daemon does with it now (Ember's own fields under "ember").
json model_json(const ModelStatus& st, int64_t created) {
  json m = describe_model(model_object(st.entry.id, created), st.entry.demo);
  json e{{"loaded", st.loaded},
         {"loading", st.loading},
         {"pinned", st.entry.pinned},
         {"size_bytes", st.entry.file_bytes},
         {"memory_bytes", st.loaded ? json(st.account_bytes) : json(nullptr)},
         {"active_requests", st.active},
         {"unloads_in_seconds", st.unloads_in ? json(static_cast<double>(st.unloads_in->count()) / 1000.0) : json(nullptr)}};
  m["ember"] = std::move(e);
  return m;
}

std::string_view model_id_of(std::string_view path, std::string_view suffix = {}) {
  std::string_view id = path.substr(std::string_view("/v1/models/").size());
  if (!suffix.empty()) id.remove_suffix(suffix.size());
  return id;
}

Response model_not_found(std::string_view id) {
  return error_response(http::status::not_found, "the model " + quote_excerpt(id) + " does not exist (GET /v1/models)",
                        "invalid_request_error", "model", "model_not_found");
}

}  // namespace

void handle_health(const Request&, RouteContext& ctx, Responder& out) {
  if (ctx.models) return out.send(json_response(http::status::ok, json{{"status", "ok"}}));
  out.send(json_response(http::status::service_unavailable, json{{"status", "loading"}}));
}

void handle_metrics(const Request&, RouteContext& ctx, Responder& out) {
  MetricsSnapshot m;
  m.requests = ctx.state.metrics.requests();
  m.http_active_requests = ctx.state.active_requests.load();
  if (ctx.models) {
    m.models = ctx.models->counters();
    if (const LeasePtr look = ctx.models->peek()) {
      m.model_loaded = true;
      m.engine = look->engine().metrics();
    }
  }
  Response res;
  res.result(http::status::ok);
  res.set(http::field::content_type, kPrometheusContentType);
  res.body() = render_prometheus(m);
  out.send(std::move(res));
}

void handle_models(const Request&, RouteContext& ctx, Responder& out) {
  const ServerOptions& o = ctx.state.options;
  if (!ctx.models) {
    // The startup model is still loading: it is the one model there is.
    json list = model_list(o.model_id, ctx.state.created);
    for (auto& m : list["data"]) m = describe_model(std::move(m), o.demo_model);
    return out.send(json_response(http::status::ok, list));
  }
  json data = json::array();
  for (const ModelStatus& st : ctx.models->status()) data.push_back(model_json(st, ctx.state.created));
  out.send(json_response(http::status::ok, json{{"object", "list"}, {"data", std::move(data)}}));
}

void handle_model(const Request& req, RouteContext& ctx, Responder& out) {
  const ServerOptions& o = ctx.state.options;
  const std::string_view id = model_id_of(path_of(req.target()));
  if (!ctx.models) {
    if (id != o.model_id) return out.send(model_not_found(id));
    return out.send(json_response(http::status::ok, describe_model(model_object(o.model_id, ctx.state.created), o.demo_model)));
  }
  for (const ModelStatus& st : ctx.models->status()) {
    if (st.entry.id == id) return out.send(json_response(http::status::ok, model_json(st, ctx.state.created)));
  }
  out.send(model_not_found(id));
}

void handle_model_unload(const Request& req, RouteContext& ctx, Responder& out) {
  const std::string id(model_id_of(path_of(req.target()), "/unload"));
  ModelRegistry& models = *ctx.models;
  if (!models.knows(id)) return out.send(model_not_found(id));
  // Quick: the registry's thread stops and frees the engine.
  const ModelRegistry::UnloadResult result = models.unload(id);
  const char* status = result == ModelRegistry::UnloadResult::Unloaded   ? "unloaded"
                       : result == ModelRegistry::UnloadResult::WhenIdle ? "unloading"
                                                                         : "not_loaded";
  out.send(json_response(http::status::ok, json{{"id", id}, {"object", "model"}, {"status", status}}));
}

}  // namespace ember::server
