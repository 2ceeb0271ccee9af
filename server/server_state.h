#pragma once
// What every connection of one server shares: options, the engine, the advertised model id, and
// counters. Free of Asio so tools/ can fill in ServerOptions.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "core/chat/chat_template.h"
#include "server/engine_worker.h"
#include "server/openai_api.h"

namespace ember::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;                       // 0: an ephemeral port (see HttpServer::port())
  std::string model_id = "ember";             // what /v1/models reports
  size_t max_body_bytes = 1 << 20;            // larger requests get 413
  size_t max_header_bytes = 16 * 1024;        // larger headers get 431
  std::chrono::seconds io_timeout{30};        // per read or write (idle keep-alive connections too)
  std::chrono::seconds request_timeout{600};  // a whole generation, queueing included
  RequestLimits limits;
  std::string chat_template;                  // a family name overriding the model's; empty: resolve
};

struct ServerState {
  ServerState(EngineWorker& e, ServerOptions o, int64_t created_at)
      : engine(e), options(std::move(o)), created(created_at) {}
  EngineWorker& engine;
  const ServerOptions options;
  const int64_t created;                  // Unix seconds, reported as the model's "created"
  ChatTemplate chat_template = ChatTemplate::ChatML;  // resolved once when the server is built
  std::atomic<uint64_t> next_id{1};       // for completion ids
  std::atomic<int64_t> active_requests{0};  // being answered now (for a graceful shutdown)
};

}  // namespace ember::server
