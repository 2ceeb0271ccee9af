#pragma once
// One HTTP/1.1 connection (Beast): a strand per connection, a fresh parser with header and body
// limits per request, a timeout re-armed before every read and write, keep-alive, one write in
// flight, lingering close, and the wind-down of a graceful stop. What a request means is the
// router's business (server/router.h); the session only carries its answer: a whole response, or
// a generation's output as one JSON response or an SSE stream (server/sse_stream.h).
// Generation results arrive from the engine thread as handlers posted to the strand.
// A template over the socket protocol: TCP and Unix domain sockets (explicitly instantiated in
// the .cpp for boost::asio::ip::tcp and boost::asio::local::stream_protocol).
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/completion_events.h"
#include "server/request_parser.h"
#include "server/responder.h"
#include "server/server_state.h"
#include "server/session_registry.h"
#include "server/sse_stream.h"

namespace ember::server {

template <class Protocol>
class HttpSession : public SessionBase,
                    public Responder,
                    public std::enable_shared_from_this<HttpSession<Protocol>> {
 public:
  // `check_host`: apply the DNS-rebinding Host check (TCP listeners bound to loopback).
  HttpSession(typename Protocol::socket&& socket, ServerState& state, bool check_host);
  ~HttpSession() override;
  void start();
  void begin_shutdown() override;

  // Responder: called by the router's handlers, on this connection's strand.
  void send(Response res, bool close = false) override;
  void offload(std::function<void()> work, std::function<void()> then) override;
  void run_generation(EngineWorker& engine, GenerationJob job, std::shared_ptr<CompletionEvents> events) override;
  std::function<void(std::function<void()>)> poster() override;

 private:
  // Reading a request.
  void do_read();
  void on_read(boost::beast::error_code ec, size_t bytes);
  void refuse_unreadable_request(boost::beast::error_code ec);  // a request the parser stopped on
  void begin_request();
  void end_request();
  void on_write(bool close, boost::beast::error_code ec, size_t bytes);

  // A generation: the timer bounds the whole request and keeps the session alive meanwhile.
  void arm_request_timer();
  void stop_generation();  // cancels the engine's job, if any, and the request timer
  // A non-streaming request writes nothing until the end, so a client that hangs up would go
  // unnoticed: watch the socket for end-of-stream while the engine works.
  void watch_for_hangup();
  void on_hangup_watch(boost::beast::error_code ec);
  void on_generation_done(std::vector<ChoiceResult> choices, std::exception_ptr error);

  // A streamed answer (the state lives in sse_).
  void start_stream();
  void on_stream_text(const std::string& text);
  void on_stream_choice_end(GenerationStats stats);
  void on_stream_done(GenerationStats stats, std::exception_ptr error);
  void pump_stream();  // starts the next write the stream has due, or ends the stream when Done
  void on_stream_write(boost::beast::error_code ec, size_t bytes);
  void end_stream();
  void arm_keepalive();
  void on_keepalive(boost::beast::error_code ec);

  // Ending the connection.
  void on_shutdown();
  void do_close();
  // Lingering close: after our FIN, read and discard what the client still sends (e.g. the rest
  // of a body we refused with 413) for a bounded time and size, so that closing with unread data
  // does not reset the connection before the client has read our answer.
  void drain(boost::beast::error_code ec, size_t bytes);
  void drop_connection() noexcept;  // abortive: cancels the generation and closes the socket now

  // Nothing thrown while answering may cross into Asio: every handler this session gives Asio
  // runs through guarded(). Before the answer has begun, a throw becomes the answer (BadRequest
  // 400, anything else 500); after, it is logged once and the connection ends.
  template <class Step>
  void guarded(Step&& step) noexcept;
  template <class... Args>
  auto guard(void (HttpSession::*step)(Args...));
  bool can_answer() const;
  void answer_failure(boost::beast::http::status status, const std::string& message, const std::string& type,
                      const std::string& param = {}) noexcept;
  void abandon(const std::string& what) noexcept;

  void add_cors_headers(boost::beast::http::fields& fields) const;

  boost::beast::basic_stream<Protocol> stream_;
  // Bounded: a header, or a chunked body's trailer, must fit in it whole to be parsed, so an
  // unbounded buffer would let one request grow it without limit.
  boost::beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  ServerState& state_;
  RouteContext ctx_;      // of the request being answered
  std::string peer_;      // who is connected, for the log
  uint64_t registry_id_ = 0;
  boost::asio::steady_timer request_timer_;
  boost::asio::steady_timer keepalive_timer_;
  std::shared_ptr<Response> response_;  // the whole response being written, alive until it is
  bool keep_alive_ = false;
  bool in_request_ = false;
  bool abandoned_ = false;  // a failure was logged and the connection is ending
  unsigned version_ = kHttp11;   // of the request being answered: every response speaks it
  size_t drained_bytes_ = 0;

  // The current generation.
  std::shared_ptr<std::atomic<bool>> cancel_;
  std::shared_ptr<CompletionEvents> events_;
  bool awaiting_engine_ = false;  // a non-streaming request waits for on_generation_done
  bool watching_hangup_ = false;  // a wait_read on the socket is pending

  // A streamed answer: its header is written through Beast's serializer, the events after it as
  // the bytes sse_ hands out.
  SseStream sse_;
  std::optional<boost::beast::http::response<boost::beast::http::empty_body>> sse_header_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>> sse_serializer_;
  std::chrono::steady_clock::time_point last_write_{};
};

}  // namespace ember::server
