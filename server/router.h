#pragma once
// Maps a request that was read whole to its handler: refuses everything while the server stops,
// applies the access gate, then picks the route by path (404 when none), checks its method (405
// with Allow) and, for the model endpoints, that the model is loaded (503 + Retry-After). Each
// request is answered exactly once through `out`, now or later (the completion endpoints).
#include "server/http_message.h"
#include "server/responder.h"

namespace ember::server {

// Sets ctx.endpoint and ctx.models. May throw (BadRequest, or anything a handler throws): the
// connection turns that into a 400 or 500.
void route(const Request& req, RouteContext& ctx, Responder& out);

}  // namespace ember::server
