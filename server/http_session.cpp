#include "server/http_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <random>

namespace ember::server {
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using nlohmann::json;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string_view path_of(std::string_view target) {
  const auto q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

// The text of an exception the engine thread caught, for the client's error object.
std::string failure_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
  }
  return "generation failed";
}

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket&& socket, ServerState& state)
    : stream_(std::move(socket)), state_(state), request_timer_(stream_.get_executor()) {}

HttpSession::~HttpSession() {
  // The client went away (or the server stops): a generation still running for us stops.
  if (cancel_) cancel_->store(true);
  if (in_request_) state_.active_requests.fetch_sub(1);
}

void HttpSession::start() {
  net::dispatch(stream_.get_executor(), beast::bind_front_handler(&HttpSession::do_read, shared_from_this()));
}

void HttpSession::do_read() {
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(state_.options.max_header_bytes));
  parser_->body_limit(state_.options.max_body_bytes);
  stream_.expires_after(state_.options.io_timeout);
  http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&HttpSession::on_read, shared_from_this()));
}

void HttpSession::on_read(beast::error_code ec, size_t) {
  if (ec == http::error::end_of_stream) return do_close();
  if (ec == http::error::body_limit) {
    in_request_ = true;
    state_.active_requests.fetch_add(1);
    return send_error(http::status::payload_too_large,
                      "the request body exceeds " + std::to_string(state_.options.max_body_bytes) + " bytes",
                      "invalid_request_error", {}, {}, /*close=*/true);
  }
  if (ec == http::error::header_limit) {
    in_request_ = true;
    state_.active_requests.fetch_add(1);
    return send_error(http::status::request_header_fields_too_large, "the request headers are too large",
                      "invalid_request_error", {}, {}, true);
  }
  if (ec) {
    if (ec.category() == beast::error_code(http::error::bad_method).category()) {
      in_request_ = true;
      state_.active_requests.fetch_add(1);
      return send_error(http::status::bad_request, "malformed HTTP request: " + ec.message(),
                        "invalid_request_error", {}, {}, true);
    }
    return;  // timeout, reset, ...: nothing to answer; the session ends
  }
  in_request_ = true;
  state_.active_requests.fetch_add(1);
  Request req = parser_->release();
  keep_alive_ = req.keep_alive();
  try {
    handle_request(req);
  } catch (const std::exception& e) {
    // Nothing thrown while answering may cross into Asio; the client gets a 500 instead.
    if (!writing_) send_error(http::status::internal_server_error, e.what(), "server_error");
  }
}

void HttpSession::handle_request(const Request& req) {
  const std::string_view path = path_of(req.target());
  const std::string models_prefix = "/v1/models/";
  auto only = [&](http::verb verb) {
    if (req.method() == verb) return true;
    Response res{http::status::method_not_allowed, req.version()};
    res.set(http::field::allow, http::to_string(verb));
    res.set(http::field::content_type, "application/json");
    res.body() = error_body("method " + std::string(req.method_string()) + " is not allowed on " +
                                std::string(path),
                            "invalid_request_error")
                     .dump();
    send(std::move(res));
    return false;
  };

  if (path == "/health") {
    if (only(http::verb::get)) send_json(http::status::ok, json{{"status", "ok"}});
  } else if (path == "/v1/models") {
    if (only(http::verb::get)) send_json(http::status::ok, model_list(state_.options.model_id, state_.created));
  } else if (path.substr(0, models_prefix.size()) == models_prefix) {
    if (!only(http::verb::get)) return;
    const std::string_view id = path.substr(models_prefix.size());
    if (id == state_.options.model_id) {
      send_json(http::status::ok, model_object(state_.options.model_id, state_.created));
    } else {
      send_error(http::status::not_found, "the model '" + std::string(id) + "' does not exist",
                 "invalid_request_error", "model", "model_not_found");
    }
  } else if (path == "/v1/completions") {
    if (only(http::verb::post)) handle_completion(req, /*chat=*/false);
  } else if (path == "/v1/chat/completions") {
    if (only(http::verb::post)) handle_completion(req, /*chat=*/true);
  } else {
    send_error(http::status::not_found, "no route for " + std::string(path), "invalid_request_error");
  }
}

void HttpSession::handle_completion(const Request& req, bool chat) {
  CompletionRequest cr;
  std::vector<int32_t> prompt;
  try {
    const Tokenizer& tok = state_.engine.model().tokenizer();
    if (chat) {
      cr = parse_chat_request(req.body(), state_.options.limits);
      auto special_text = [&](int32_t id) { return id >= 0 ? tok.token_to_piece(id, true) : std::string(); };
      const RenderedChat rendered = render_chat(state_.chat_template, cr.messages, /*add_generation_prompt=*/true,
                                                special_text(tok.bos_id()), special_text(tok.eos_id()));
      // The template's own markers are special tokens; a BOS it wrote must not be doubled.
      prompt = tok.encode(rendered.text, /*add_special=*/!rendered.starts_with_bos, /*parse_special=*/true);
      if (!cr.max_tokens_given) {
        cr.max_tokens = std::max<int64_t>(1, state_.engine.n_ctx() - static_cast<int64_t>(prompt.size()));
      }
    } else {
      cr = parse_completion_request(req.body(), state_.options.limits);
      prompt = tok.encode(cr.prompt, /*add_special=*/true, /*parse_special=*/false);
    }
    if (prompt.empty()) throw BadRequest("the prompt is empty", chat ? "messages" : "prompt");
    const int64_t need = static_cast<int64_t>(prompt.size()) + cr.max_tokens;
    if (need > state_.engine.n_ctx()) {
      throw BadRequest("the prompt (" + std::to_string(prompt.size()) + " tokens) plus max_tokens (" +
                           std::to_string(cr.max_tokens) + ") exceed the context window of " +
                           std::to_string(state_.engine.n_ctx()) + " tokens",
                       "max_tokens");
    }
    if (!cr.seed_given) cr.sampling.seed = std::random_device{}();
    validate_sampling_params(cr.sampling, state_.engine.model().tokenizer().n_vocab());
  } catch (const BadRequest& e) {
    return send_error(http::status::bad_request, e.what(), "invalid_request_error", e.param());
  } catch (const std::invalid_argument& e) {
    return send_error(http::status::bad_request, e.what(), "invalid_request_error");
  }

  cancel_ = std::make_shared<std::atomic<bool>>(false);
  chat_ = chat;
  first_delta_ = true;
  completion_id_ = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(state_.next_id.fetch_add(1));
  created_ = unix_now();
  prompt_tokens_ = static_cast<int64_t>(prompt.size());

  GenerationJob job;
  job.prompt = std::move(prompt);
  job.sampling = cr.sampling;
  job.max_tokens = cr.max_tokens;
  job.cancelled = cancel_;
  // The engine thread only posts to this connection's strand; a weak pointer, so a connection
  // that is gone is simply not called.
  auto ex = stream_.get_executor();
  std::weak_ptr<HttpSession> weak = weak_from_this();
  if (cr.stream) {
    job.on_text = [ex, weak](std::string_view text) {
      net::post(ex, [weak, t = std::string(text)] {
        if (auto self = weak.lock()) self->on_stream_text(t);
      });
    };
    job.on_done = [ex, weak](const GenerationStats& stats, std::exception_ptr error) {
      net::post(ex, [weak, stats, error] {
        if (auto self = weak.lock()) self->on_stream_done(stats, error);
      });
    };
  } else {
    auto text = std::make_shared<std::string>();  // written only by the engine thread until on_done
    job.on_text = [text](std::string_view t) { text->append(t); };
    job.on_done = [ex, weak, text](const GenerationStats& stats, std::exception_ptr error) {
      net::post(ex, [weak, text, stats, error] {
        if (auto self = weak.lock()) self->on_generation_done(std::move(*text), stats, error);
      });
    };
  }
  if (!state_.engine.try_submit(std::move(job))) {
    Response res{http::status::service_unavailable, 11};
    res.set(http::field::retry_after, "1");
    res.set(http::field::content_type, "application/json");
    res.body() = error_body("the server is busy (request queue full); retry later", "server_error", {},
                            "queue_full")
                     .dump();
    return send(std::move(res));
  }
  arm_request_timer();

  if (cr.stream) {
    stream_done_ = false;
    last_chunk_sent_ = false;
    outbox_.clear();
    sse_header_.emplace(http::status::ok, 11);
    sse_header_->set(http::field::content_type, "text/event-stream");
    sse_header_->set(http::field::cache_control, "no-cache");
    sse_header_->keep_alive(keep_alive_);
    sse_header_->chunked(true);
    sse_serializer_.emplace(*sse_header_);
    writing_ = true;
    stream_.expires_after(state_.options.io_timeout);
    http::async_write_header(stream_, *sse_serializer_,
                             beast::bind_front_handler(&HttpSession::on_stream_write, shared_from_this()));
  }
}

void HttpSession::arm_request_timer() {
  request_timer_.expires_after(state_.options.request_timeout);
  request_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec) return;  // cancelled: the result arrived
    // The whole request took too long: stop the generation and drop the connection.
    if (self->cancel_) self->cancel_->store(true);
    beast::error_code ignored;
    self->stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    self->stream_.socket().close(ignored);
  });
}

void HttpSession::on_generation_done(std::string text, GenerationStats stats, std::exception_ptr error) {
  request_timer_.cancel();
  cancel_.reset();
  if (error) {
    return send_error(http::status::internal_server_error, failure_message(error), "server_error");
  }
  const auto& model = state_.options.model_id;
  send_json(http::status::ok,
            chat_ ? chat_response(completion_id_, created_, model, text, stats.finish, prompt_tokens_,
                                  stats.generated_tokens)
                  : completion_response(completion_id_, created_, model, text, stats.finish, prompt_tokens_,
                                        stats.generated_tokens));
}

void HttpSession::on_stream_text(const std::string& text) {
  const auto& model = state_.options.model_id;
  if (!chat_) {
    outbox_ += sse_event(completion_chunk(completion_id_, created_, model, text, std::nullopt));
  } else {
    if (first_delta_) outbox_ += sse_event(chat_chunk(completion_id_, created_, model, true, "", std::nullopt));
    first_delta_ = false;
    outbox_ += sse_event(chat_chunk(completion_id_, created_, model, false, text, std::nullopt));
  }
  pump_stream();
}

void HttpSession::on_stream_done(GenerationStats stats, std::exception_ptr error) {
  request_timer_.cancel();
  if (error) {
    outbox_ += sse_event(error_body(failure_message(error), "server_error"));
  } else if (!chat_) {
    outbox_ += sse_event(completion_chunk(completion_id_, created_, state_.options.model_id, "", stats.finish));
  } else {
    const auto& model = state_.options.model_id;
    if (first_delta_) outbox_ += sse_event(chat_chunk(completion_id_, created_, model, true, "", std::nullopt));
    first_delta_ = false;
    outbox_ += sse_event(chat_chunk(completion_id_, created_, model, false, std::nullopt, stats.finish));
  }
  outbox_ += kSseDone;
  stream_done_ = true;
  pump_stream();
}

void HttpSession::pump_stream() {
  if (writing_) return;
  if (!outbox_.empty()) {
    wire_.swap(outbox_);
    outbox_.clear();
    writing_ = true;
    stream_.expires_after(state_.options.io_timeout);
    net::async_write(stream_, http::make_chunk(net::buffer(wire_)),
                     beast::bind_front_handler(&HttpSession::on_stream_write, shared_from_this()));
  } else if (stream_done_ && !last_chunk_sent_) {
    last_chunk_sent_ = true;
    writing_ = true;
    stream_.expires_after(state_.options.io_timeout);
    net::async_write(stream_, http::make_chunk_last(),
                     beast::bind_front_handler(&HttpSession::on_stream_write, shared_from_this()));
  } else if (last_chunk_sent_) {
    cancel_.reset();
    sse_serializer_.reset();
    sse_header_.reset();
    end_request();
    if (keep_alive_) return do_read();
    do_close();
  }
}

void HttpSession::on_stream_write(beast::error_code ec, size_t) {
  writing_ = false;
  if (ec) {
    // The client is gone: stop generating for it; the session ends when nothing holds it.
    if (cancel_) cancel_->store(true);
    request_timer_.cancel();
    return;
  }
  pump_stream();
}

void HttpSession::send_json(http::status status, const json& body, bool close) {
  Response res{status, 11};
  res.set(http::field::content_type, "application/json");
  res.body() = body.dump(-1, ' ', false, json::error_handler_t::replace);
  send(std::move(res), close);
}

void HttpSession::send_error(http::status status, const std::string& message, const std::string& type,
                             const std::string& param, const std::string& code, bool close) {
  send_json(status, error_body(message, type, param, code), close);
}

void HttpSession::send(Response res, bool close) {
  res.set(http::field::server, "ember");
  res.keep_alive(keep_alive_ && !close);
  res.prepare_payload();
  const bool will_close = !res.keep_alive();
  auto msg = std::make_shared<Response>(std::move(res));
  response_ = msg;
  writing_ = true;
  stream_.expires_after(state_.options.io_timeout);
  http::async_write(stream_, *msg,
                    beast::bind_front_handler(&HttpSession::on_write, shared_from_this(), will_close));
}

void HttpSession::on_write(bool close, beast::error_code ec, size_t) {
  writing_ = false;
  response_.reset();
  end_request();
  if (ec) return;
  if (close) return do_close();
  do_read();
}

void HttpSession::end_request() {
  if (!in_request_) return;
  in_request_ = false;
  state_.active_requests.fetch_sub(1);
}

void HttpSession::do_close() {
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
}

}  // namespace ember::server
