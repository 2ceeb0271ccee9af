#pragma once
// One HTTP/1.1 connection (Beast): a strand per connection, a fresh parser with header and body
// limits per request, a timeout re-armed before every read and write, keep-alive, one write in
// flight. Generation results arrive from the engine thread as handlers posted to the strand.
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

#include "server/http_metrics.h"
#include "server/request_parser.h"
#include "server/server_state.h"
#include "server/session_registry.h"

namespace ember::server {

template <class Protocol>
class HttpSession : public SessionBase, public std::enable_shared_from_this<HttpSession<Protocol>> {
 public:
  // `check_host`: apply the DNS-rebinding Host check (TCP listeners bound to loopback).
  HttpSession(typename Protocol::socket&& socket, ServerState& state, bool check_host);
  ~HttpSession() override;
  void start();
  void begin_shutdown() override;

 private:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  using Response = boost::beast::http::response<boost::beast::http::string_body>;

  void do_read();
  void on_read(boost::beast::error_code ec, size_t bytes);
  void refuse_unreadable_request(boost::beast::error_code ec);  // a request the parser stopped on
  void begin_request();
  void handle_request(const Request& req);
  bool check_access(const Request& req);  // false: answered (403/401/preflight)
  void answer_preflight(const Request& req);
  void remember_cors_origin(const boost::beast::http::fields& fields);  // an allowed Origin: echo it
  void handle_completion(const Request& req, bool chat, EngineWorker& engine);
  // Runs on a worker thread (tokenizing a long prompt must not stall the I/O thread); the
  // outcome is handled back on this connection's strand.
  void submit_completion(CompletionRequest request, bool chat, EngineWorker& engine);
  void start_completion(CompletionRequest request, GenerationJob job, bool chat, EngineWorker& engine);
  void handle_tokenize(const Request& req, bool detokenize, EngineWorker& engine);
  // Runs `work` off the I/O thread, then `then` on the strand (unless the connection is gone).
  void offload(std::function<void()> work, std::function<void()> then);
  void run_guarded(const std::function<void()>& step);
  void handle_metrics();
  void send(Response res, bool close = false);
  void send_json(boost::beast::http::status status, const nlohmann::json& body, bool close = false);
  void send_error(boost::beast::http::status status, const std::string& message, const std::string& type,
                  const std::string& param = {}, const std::string& code = {}, bool close = false);
  void send_unavailable(const std::string& message, const std::string& code, const char* retry_after,
                        bool close = false);
  void add_cors_headers(boost::beast::http::fields& fields) const;
  void on_write(bool close, boost::beast::error_code ec, size_t bytes);
  void do_close();
  // Lingering close: after our FIN, read and discard what the client still sends (e.g. the rest
  // of a body we refused with 413) for a bounded time and size, so that closing with unread data
  // does not reset the connection before the client has read our answer.
  void drain(boost::beast::error_code ec, size_t bytes);
  void drop_connection();  // abortive: cancels the generation and closes the socket now
  void end_request();
  void on_shutdown();

  // Waiting for the engine: the timer keeps the session alive and bounds the whole request.
  void arm_request_timer();
  // A non-streaming request writes nothing until the end, so a client that hangs up would go
  // unnoticed: watch the socket for end-of-stream while the engine works.
  void watch_for_hangup();
  void on_hangup_watch(boost::beast::error_code ec);
  void on_generation_done(std::string text, GenerationStats stats, std::exception_ptr error);
  void on_stream_text(const std::string& text);
  void on_stream_done(GenerationStats stats, std::exception_ptr error);
  void queue_chunk(nlohmann::json chunk);
  void pump_stream();
  void on_stream_write(boost::beast::error_code ec, size_t bytes);
  void arm_keepalive();
  void on_keepalive(boost::beast::error_code ec);
  void stop_stream_timers();

  boost::beast::basic_stream<Protocol> stream_;
  // Bounded: a header, or a chunked body's trailer, must fit in it whole to be parsed, so an
  // unbounded buffer would let one request grow it without limit.
  boost::beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  ServerState& state_;
  const bool check_host_;
  uint64_t registry_id_ = 0;
  boost::asio::steady_timer request_timer_;
  boost::asio::steady_timer keepalive_timer_;
  std::shared_ptr<void> response_;  // keeps the message alive while it is written
  bool keep_alive_ = false;
  bool in_request_ = false;
  unsigned version_ = 11;  // of the request being answered: every response speaks it
  Endpoint endpoint_ = Endpoint::Other;  // of the request being answered, for /metrics
  std::string cors_origin_;              // an allowed Origin of this request: echoed back

  // The current completion.
  std::shared_ptr<std::atomic<bool>> cancel_;
  bool awaiting_engine_ = false;  // a non-streaming request waits for on_generation_done
  bool watching_hangup_ = false;  // a wait_read on the socket is pending
  size_t drained_bytes_ = 0;
  std::string completion_id_;
  int64_t created_ = 0;
  int64_t prompt_tokens_ = 0;
  bool chat_ = false;           // /v1/chat/completions shapes
  bool first_delta_ = true;     // the first chat chunk carries the role
  bool include_usage_ = false;  // stream_options.include_usage

  // Streaming state: events wait in outbox_ while one chunk is being written from wire_.
  std::optional<boost::beast::http::response<boost::beast::http::empty_body>> sse_header_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>> sse_serializer_;
  std::string outbox_;
  std::string wire_;
  bool streaming_ = false;
  bool writing_ = false;
  bool stream_done_ = false;  // nothing more is queued (finished, failed, cut off or shut down)
  bool last_chunk_sent_ = false;
  bool chunked_stream_ = true;  // HTTP/1.1; an HTTP/1.0 stream is raw bytes ended by closing
  std::chrono::steady_clock::time_point last_write_{};
};

}  // namespace ember::server
