#pragma once
// Who may be answered at all, before any handler runs: the Host check (DNS rebinding), the CORS
// preflight, the page's origin and the API key, in that order. A preflight carries no
// credentials, so it is answered before the key check; GET /health stays public so supervisors
// can probe it. The decisions themselves are server/access_control.h's pure functions.
#include "server/http_message.h"
#include "server/responder.h"

namespace ember::server {

// True: the request may go on to its handler. False: it has been answered (403, 401, or the
// preflight's 204). Sets ctx.cors_origin once the Host check passed.
bool admit(const Request& req, RouteContext& ctx, Responder& out);

// The Origin of `fields` when the server's cors_origins allows it, else empty: responses to the
// request echo it so a page can read them (errors included).
std::string allowed_cors_origin(const boost::beast::http::fields& fields, const ServerOptions& options);

}  // namespace ember::server
