#pragma once
// What every connection of one server shares: options, the models (once the startup model is
// loaded), counters and the live sessions. Free of Asio so tools/ can fill in ServerOptions.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/chat/chat_template.h"
#include "server/model_registry.h"
#include "server/http_metrics.h"
#include "server/openai_api.h"
#include "server/session_registry.h"

namespace ember::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;                       // 0: an ephemeral port (see HttpServer::port())
  bool tcp = true;                            // false: listen only on the `listen` endpoints
  // Further endpoints: "unix:/path/to.sock" (Android and desktop apps) or "HOST:PORT".
  std::vector<std::string> listen;
  std::string model_id = "ember";             // the startup model's id (/v1/models while it loads)
  bool demo_model = false;                    // serving the built-in demo model: say so in /v1/models
  size_t max_body_bytes = 1 << 20;            // larger requests get 413
  size_t max_header_bytes = 16 * 1024;        // larger headers get 431
  std::chrono::seconds io_timeout{30};        // per read or write (idle keep-alive connections too)
  std::chrono::seconds request_timeout{600};  // a whole generation, queueing included
  std::chrono::seconds keepalive_interval{10};  // SSE ": keep-alive" comments while nothing else is sent
  size_t max_stream_backlog_bytes = 1 << 20;  // a reader this far behind a stream is cut off
  std::chrono::seconds shutdown_grace{5};     // running streams may finish for this long on SIGTERM
  RequestLimits limits;
  std::string chat_template;                  // a family name overriding the model's; empty: resolve
  // Security. Empty api_keys: no authentication. /health and CORS preflights stay public.
  std::vector<std::string> api_keys;
  // Origins allowed to call from a browser ("*" for any); empty: CORS off (no CORS headers).
  std::vector<std::string> cors_origins;
  // Extra Host header names accepted when bound to loopback (DNS-rebinding protection); loopback
  // names and addresses are always accepted.
  std::vector<std::string> allowed_hosts;
};

struct ServerState {
  ServerState(ServerOptions o, int64_t created_at) : options(std::move(o)), created(created_at) {}
  // The served models (server/model_registry.h). Null while the startup model loads; set once by
  // HttpServer::attach() (release).
  std::atomic<ModelRegistry*> models{nullptr};
  ModelRegistry* ready_models() const { return models.load(std::memory_order_acquire); }
  const ServerOptions options;
  const int64_t created;                  // Unix seconds, reported as the model's "created"
  std::atomic<uint64_t> next_id{1};       // for completion ids
  std::atomic<int64_t> active_requests{0};  // being answered now (for a graceful shutdown)
  std::atomic<bool> stopping{false};      // stop() began: new requests get 503 "server_shutdown"
  HttpMetrics metrics;                    // requests by endpoint and status, for /metrics
  SessionRegistry sessions;               // live connections, ended by a graceful stop
  // Runs CPU-heavy request work (tokenizing a prompt) off the I/O threads; HttpServer points it at
  // its worker pool. Unset (unit tests that build a state by hand): the work runs inline.
  std::function<void(std::function<void()>)> offload;
};

}  // namespace ember::server
