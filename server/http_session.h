#pragma once
// One HTTP/1.1 connection (Beast): a strand per connection, a fresh parser with header and body
// limits per request, a timeout re-armed before every read and write, keep-alive, one write in
// flight. Generation results arrive from the engine thread as handlers posted to the strand.
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <string>

#include "server/server_state.h"

namespace ember::server {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket&& socket, ServerState& state);
  ~HttpSession();
  void start();

 private:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  using Response = boost::beast::http::response<boost::beast::http::string_body>;

  void do_read();
  void on_read(boost::beast::error_code ec, size_t bytes);
  void handle_request(const Request& req);
  void handle_completion(const Request& req, bool chat);
  void send(Response res, bool close = false);
  void send_json(boost::beast::http::status status, const nlohmann::json& body, bool close = false);
  void send_error(boost::beast::http::status status, const std::string& message, const std::string& type,
                  const std::string& param = {}, const std::string& code = {}, bool close = false);
  void on_write(bool close, boost::beast::error_code ec, size_t bytes);
  void do_close();
  void end_request();

  // Waiting for the engine: the timer keeps the session alive and bounds the whole request.
  void arm_request_timer();
  void on_generation_done(std::string text, GenerationStats stats, std::exception_ptr error);
  void on_stream_text(const std::string& text);
  void on_stream_done(GenerationStats stats, std::exception_ptr error);
  void pump_stream();
  void on_stream_write(boost::beast::error_code ec, size_t bytes);

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  ServerState& state_;
  boost::asio::steady_timer request_timer_;
  std::shared_ptr<void> response_;  // keeps the message alive while it is written
  bool keep_alive_ = false;
  bool in_request_ = false;

  // The current completion.
  std::shared_ptr<std::atomic<bool>> cancel_;
  std::string completion_id_;
  int64_t created_ = 0;
  int64_t prompt_tokens_ = 0;
  bool chat_ = false;         // /v1/chat/completions shapes
  bool first_delta_ = true;   // the first chat chunk carries the role

  // Streaming state: events wait in outbox_ while one chunk is being written from wire_.
  std::optional<boost::beast::http::response<boost::beast::http::empty_body>> sse_header_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>> sse_serializer_;
  std::string outbox_;
  std::string wire_;
  bool writing_ = false;
  bool stream_done_ = false;
  bool last_chunk_sent_ = false;
};

}  // namespace ember::server
