#pragma once
// POST /v1/completions and /v1/chat/completions: parse the request on the I/O thread (cheap,
// bounded by max_body_bytes), lease the model it names (server/model_lease.h; loading it when
// needed), render and tokenize the prompt off the I/O thread, then hand the job to the connection.
#include "server/http_message.h"
#include "server/responder.h"

namespace ember::server {

// `chat`: /v1/chat/completions, else /v1/completions. ctx.models must be set (the router answers
// 503 while the startup model loads).
void handle_completion(const Request& req, bool chat, RouteContext& ctx, Responder& out);

}  // namespace ember::server
