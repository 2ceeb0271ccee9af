#pragma once
// The endpoints that only report: GET /health, /metrics, /v1/models and /v1/models/{id}. They
// answer at once on the I/O thread, and (but /health's "ok") also while the model loads.
#include "server/http_message.h"
#include "server/responder.h"

namespace ember::server {

void handle_health(const Request& req, RouteContext& ctx, Responder& out);
void handle_metrics(const Request& req, RouteContext& ctx, Responder& out);
void handle_models(const Request& req, RouteContext& ctx, Responder& out);
void handle_model(const Request& req, RouteContext& ctx, Responder& out);

}  // namespace ember::server
