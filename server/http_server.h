#pragma once
// The daemon's HTTP front: listens, accepts, and hands each connection to an HttpSession. Asio
// stays behind a pimpl so callers (tools/, tests) need no Asio headers.
#include <chrono>
#include <cstdint>
#include <memory>

#include "server/engine_worker.h"
#include "server/server_state.h"

namespace ember::server {

class HttpServer {
 public:
  // Binds and listens on options.host:options.port; throws std::runtime_error naming the address
  // when that fails. Serves nothing until start().
  HttpServer(EngineWorker& engine, ServerOptions options);
  ~HttpServer();  // stop(0)
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;  // the bound port (useful with port 0)
  ChatTemplate chat_template() const;  // the family /v1/chat/completions renders with
  // Runs the I/O on `io_threads` background threads.
  void start(int io_threads = 1);
  // Blocks until SIGINT or SIGTERM arrives (the handlers are installed by start()).
  void wait_for_signal();
  // Stops accepting, lets requests being answered finish for up to `grace`, then stops the
  // engine (it is unusable afterwards) and the I/O threads. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::server
