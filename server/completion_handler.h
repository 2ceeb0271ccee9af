#pragma once
// POST /v1/completions and /v1/chat/completions: parse the request on the I/O thread (cheap,
// bounded by max_body_bytes), render and tokenize the prompt off it, then hand the job to the
// connection to run.
#include "server/http_message.h"
#include "server/responder.h"

namespace ember::server {

// ctx.engine must be set (the router answers 503 while the model loads).
void handle_completions(const Request& req, RouteContext& ctx, Responder& out);
void handle_chat_completions(const Request& req, RouteContext& ctx, Responder& out);

}  // namespace ember::server
