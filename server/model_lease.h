#pragma once
// How a handler gets the model its request names: lease_model asks the registry (loading the model
// on the registry's thread when needed) and continues on the connection with ctx.lease set. A
// model that cannot be had is answered here with the registry's status and code (404
// model_not_found, 400 model_required, 503 model_capacity / insufficient_memory, 500
// model_load_failed).
#include <chrono>
#include <functional>
#include <optional>
#include <string_view>

#include "server/responder.h"

namespace ember::server {

void lease_model(std::string_view id, std::optional<std::chrono::milliseconds> keep_alive, RouteContext& ctx,
                 Responder& out, std::function<void()> then);

// A ModelUnavailable as the error response the client gets.
Response model_unavailable_response(const ModelUnavailable& e);

}  // namespace ember::server
