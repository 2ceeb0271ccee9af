#pragma once
// The endpoints about the daemon and its models: GET /health, /metrics, /v1/models and
// /v1/models/{id} answer at once on the I/O thread, and (but /health's "ok") also while the
// startup model loads; POST /v1/models/{id}/unload unloads a model (off the I/O thread).
#include "server/http_message.h"
#include "server/responder.h"

namespace ember::server {

void handle_health(const Request& req, RouteContext& ctx, Responder& out);
void handle_metrics(const Request& req, RouteContext& ctx, Responder& out);
void handle_models(const Request& req, RouteContext& ctx, Responder& out);
void handle_model(const Request& req, RouteContext& ctx, Responder& out);
void handle_model_unload(const Request& req, RouteContext& ctx, Responder& out);

}  // namespace ember::server
