#include "server/model_lease.h"

#include "server/openai_api.h"

namespace ember::server {

void lease_model(std::string_view id, std::optional<std::chrono::milliseconds> keep_alive, RouteContext& ctx,
                 Responder& out, std::function<void()> then) {
  auto post = out.poster();
  // The callback may run now (the model is loaded) or on the registry's thread after a load;
  // either way the rest runs on the connection, which may be gone by then (then nothing runs and
  // the lease is dropped with the callback).
  ctx.models->acquire(id, keep_alive, [post, &ctx, &out, then = std::move(then)](LeasePtr lease, std::exception_ptr e) {
    post([&ctx, &out, then, lease = std::move(lease), e]() mutable {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const ModelUnavailable& m) {
          return out.send(model_unavailable_response(m));
        }
      }
      ctx.lease = std::move(lease);
      then();
    });
  });
}

Response model_unavailable_response(const ModelUnavailable& e) {
  const auto status = static_cast<boost::beast::http::status>(e.status());
  const char* type = e.status() == 404 || e.status() == 400 ? "invalid_request_error" : "server_error";
  Response res = error_response(status, e.what(), type, e.param(), e.code());
  if (e.status() == 503 && e.code() != "server_shutdown") res.set(boost::beast::http::field::retry_after, "5");
  return res;
}

}  // namespace ember::server
