#pragma once
// The daemon's HTTP front: listens (TCP and Unix domain sockets), accepts, and hands each
// connection to an HttpSession. It can answer before the startup model is loaded: /health says
// "loading" and model endpoints answer 503 until attach(). Asio stays behind a pimpl so callers (tools/,
// tests) need no Asio headers.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/engine_worker.h"
#include "server/model_registry.h"
#include "server/server_state.h"

namespace ember::server {

class HttpServer {
 public:
  // Binds and listens on every endpoint of `options` (host:port unless tcp is false, then each
  // `listen` entry); throws std::runtime_error naming the address when one fails. A stale Unix
  // socket file is replaced; one a live server answers on is not. Serves nothing until start().
  explicit HttpServer(ServerOptions options);
  // The same, serving one model already loaded: construct, then attach(engine).
  HttpServer(EngineWorker& engine, ServerOptions options);
  ~HttpServer();  // stop(0)
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Model endpoints start answering with `models` (which must outlive the server). Safe while the
  // I/O threads run. Once only (std::logic_error otherwise).
  void attach(ModelRegistry& models);
  // Serves one model already loaded (tests, embedders) as options.model_id: a registry of its own
  // with that engine pinned; its chat template is options.chat_template or the model's (throws
  // what resolving it throws, leaving the server unattached).
  void attach(EngineWorker& engine);
  bool attached() const;

  uint16_t port() const;  // the first TCP endpoint's bound port (useful with port 0); 0 if none
  // Every bound endpoint as "127.0.0.1:8080", "[::1]:8080" or "unix:/path" (ports resolved).
  std::vector<std::string> endpoints() const;
  // Runs the I/O on `io_threads` background threads.
  void start(int io_threads = 1);
  // Blocks until SIGINT or SIGTERM arrives (the handlers are installed by start()).
  void wait_for_signal();
  // Whether SIGINT or SIGTERM has arrived since start(), without waiting: for work that runs
  // before wait_for_signal() and takes long (loading the model), to stop early when told to.
  bool signal_received() const;
  // Closes every listener (and removes Unix socket files), lets requests being answered finish
  // for up to `grace`, then ends the streams still running with a final "server_shutdown" error
  // event and [DONE] (503 for waiting non-streaming requests), cancelling their generations, and
  // stops the models' engines (unusable afterwards) and the I/O threads. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::server
