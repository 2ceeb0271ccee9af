#pragma once
// What a request handler may do with the connection it answers, and what it knows about the
// request beyond the message itself. The router and the handlers see only this interface, so
// they are plain functions, free of sockets and Asio, and unit-tested with a recording fake.
#include <functional>
#include <memory>
#include <string>

#include "server/engine_worker.h"
#include "server/http_message.h"
#include "server/http_metrics.h"
#include "server/server_state.h"

namespace ember::server {

class CompletionEvents;

// Per request; the connection resets it before routing each one.
struct RouteContext {
  RouteContext(ServerState& s, bool host_check) : state(s), check_host(host_check) {}
  ServerState& state;
  const bool check_host;          // a TCP listener bound to loopback: apply the DNS-rebinding check
  Endpoint endpoint = Endpoint::Other;  // the request's, for /metrics
  ModelRegistry* models = nullptr;  // set by the router: null while the startup model loads
  // The request's model, once lease_model (server/model_lease.h) got it: kept loaded until the
  // request ends (and, through the job's copy, until its generation does).
  LeasePtr lease;
  // An allowed Origin of this request, set by the access gate once the Host check passed: every
  // response to the request echoes it (CORS); empty: no CORS headers.
  std::string cors_origin;
};

class Responder {
 public:
  virtual ~Responder() = default;
  // Writes a whole response. The connection sets its version (the request's), Server, CORS and
  // keep-alive fields, and counts it for /metrics. `close`: end the connection after it.
  virtual void send(Response res, bool close = false) = 0;
  // Runs `work` off the I/O thread (tokenizing a long prompt must not stall it), then `then` back
  // on the connection, unless the connection is gone by then. `work` must catch what it throws;
  // what `then` throws is answered like a throw from a handler: BadRequest 400, anything else 500.
  virtual void offload(std::function<void()> work, std::function<void()> then) = 0;
  // Hands `job` (its callbacks and cancel flag are set here) to `engine` and delivers what it
  // generates, formatted by `events`: as SSE when events->streaming(), else as one JSON response.
  // Answers 503 itself when the engine's queue is full.
  virtual void run_generation(EngineWorker& engine, GenerationJob job, std::shared_ptr<CompletionEvents> events) = 0;
  // A function that runs work on this connection later, from any thread (the model registry's),
  // guarded like a handler. It keeps the connection until it is called or destroyed.
  virtual std::function<void(std::function<void()>)> poster() = 0;
};

}  // namespace ember::server
