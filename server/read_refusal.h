#pragma once
// The answer to a request the parser stopped on before it was read whole: which status says why
// (413 body, 431 header or trailer fields, 400 malformed or a second Host, 501 a transfer coding
// we cannot decode). Pure, so each mapping is tested without sockets.
#include <boost/beast/core/error.hpp>
#include <optional>

#include "server/http_message.h"
#include "server/request_parser.h"
#include "server/server_state.h"

namespace ember::server {

// Null for errors that are not about the request's bytes (a timeout, a reset): nothing to answer.
std::optional<Response> unreadable_request_response(boost::beast::error_code ec, RequestParser::Refusal refusal,
                                                    const ServerOptions& options);

}  // namespace ember::server
