#include "server/http_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <chrono>

#include "core/cache/fetch_error.h"
#include "server/access_control.h"
#include "server/completion_job.h"
#include "server/tokenize_api.h"

namespace ember::server {
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using nlohmann::json;

namespace {

// Lingering close (see do_close): how long and how much of a refused upload is read and dropped.
constexpr std::chrono::seconds kLingerTime{2};
constexpr size_t kDrainChunk = 64 * 1024;
constexpr size_t kMaxDrainBytes = 64 * 1024 * 1024;


int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string_view path_of(std::string_view target) {
  const auto q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

std::optional<std::string_view> header(const http::fields& fields, http::field name) {
  auto it = fields.find(name);
  if (it == fields.end()) return std::nullopt;
  return std::string_view(it->value().data(), it->value().size());
}

std::optional<std::string_view> header(const http::fields& fields, std::string_view name) {
  auto it = fields.find(beast::string_view(name.data(), name.size()));
  if (it == fields.end()) return std::nullopt;
  return std::string_view(it->value().data(), it->value().size());
}

// A client-supplied value quoted in an error message, cut so the message stays readable.
std::string quoted(std::string_view value) {
  constexpr size_t kMax = 100;
  return "'" + std::string(value.substr(0, kMax)) + (value.size() > kMax ? "...'" : "'");
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

// The error code for it: a failed read of the model (the neuron cache under a memory budget:
// I/O error, truncated pack) is the storage's fault, not the request's, and worth telling apart.
std::string failure_code(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const cache::FetchError&) {
    return "model_read_failed";
  } catch (...) {
  }
  return {};
}

// The model object, marked when it is the built-in demo model so nobody mistakes its output.
json describe_model(json model, const ServerOptions& options) {
  if (options.demo_model) {
    model["owned_by"] = "ember";
    model["ember_demo"] = true;
    model["description"] =
        "Ember's built-in synthetic demo model (random weights: it proves the API works, its text is "
        "meaningless); pass -m MODEL.gguf to `ember serve` to serve a real model";
  }
  return model;
}

// Every JSON body goes out through here: text from the client (a path, a model id) may be
// invalid UTF-8, which nlohmann's dump() would throw on.
std::string json_text(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

constexpr const char* kSseKeepAlive = ": keep-alive\n\n";

}  // namespace

template <class Protocol>
HttpSession<Protocol>::HttpSession(typename Protocol::socket&& socket, ServerState& state, bool check_host)
    : stream_(std::move(socket)),
      // A header (or trailer) may fill it up to the limit, plus one read's worth of what follows.
      buffer_(state.options.max_header_bytes + kDrainChunk),
      state_(state),
      check_host_(check_host),
      request_timer_(stream_.get_executor()),
      keepalive_timer_(stream_.get_executor()) {}

template <class Protocol>
HttpSession<Protocol>::~HttpSession() {
  // The client went away (or the server stops): a generation still running for us stops.
  if (cancel_) cancel_->store(true);
  if (in_request_) state_.active_requests.fetch_sub(1);
  if (registry_id_ != 0) state_.sessions.remove(registry_id_);
}

template <class Protocol>
void HttpSession<Protocol>::start() {
  registry_id_ = state_.sessions.add(this->weak_from_this());
  net::dispatch(stream_.get_executor(), beast::bind_front_handler(&HttpSession::do_read, this->shared_from_this()));
}

template <class Protocol>
void HttpSession<Protocol>::begin_shutdown() {
  net::post(stream_.get_executor(), beast::bind_front_handler(&HttpSession::on_shutdown, this->shared_from_this()));
}

template <class Protocol>
void HttpSession<Protocol>::do_read() {
  parser_.emplace(static_cast<std::uint32_t>(state_.options.max_header_bytes), state_.options.max_body_bytes);
  stream_.expires_after(state_.options.io_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   beast::bind_front_handler(&HttpSession::on_read, this->shared_from_this()));
}

template <class Protocol>
void HttpSession<Protocol>::begin_request() {
  in_request_ = true;
  state_.active_requests.fetch_add(1);
  cors_origin_.clear();
}

template <class Protocol>
void HttpSession<Protocol>::on_read(beast::error_code ec, size_t) {
  if (ec == http::error::end_of_stream) return do_close();
  endpoint_ = Endpoint::Other;
  if (ec) return refuse_unreadable_request(ec);
  begin_request();
  Request req = parser_->release();
  keep_alive_ = req.keep_alive();
  version_ = req.version() == 10 ? 10 : 11;
  endpoint_ = endpoint_of(path_of(req.target()));
  try {
    handle_request(req);
  } catch (const std::exception& e) {
    // Nothing thrown while answering may cross into Asio; the client gets a 500 instead.
    if (!writing_ && !streaming_) send_error(http::status::internal_server_error, e.what(), "server_error");
  }
}

// The parser stopped before a whole request was read: say why when there is something to say,
// then close (the rest of the connection's bytes cannot be trusted to start a new request).
template <class Protocol>
void HttpSession<Protocol>::refuse_unreadable_request(beast::error_code ec) {
  const bool is_http_error = ec.category() == beast::error_code(http::error::bad_method).category();
  if (!is_http_error) return;  // timeout, reset, ...: nothing to answer; the session ends
  begin_request();
  // A declared Content-Length over the limit is refused while the header is being finished, so
  // the parser does not count the header as done yet; it was read all the same.
  if (parser_->is_header_done() || ec == http::error::body_limit) {
    version_ = parser_->get().version() == 10 ? 10 : 11;
    endpoint_ = endpoint_of(path_of(parser_->get().target()));
    remember_cors_origin(parser_->get());  // so a page can read why it was refused
  }
  const auto fail = [&](http::status status, const std::string& message) {
    send_error(status, message, "invalid_request_error", {}, {}, /*close=*/true);
  };
  switch (parser_->refusal()) {
    case RequestParser::Refusal::FieldTooLarge:
      return fail(http::status::request_header_fields_too_large, "a request header field is too large");
    case RequestParser::Refusal::TrailerTooLarge:
      return fail(http::status::request_header_fields_too_large,
                  "the chunked body's trailer fields exceed max_header_bytes (" +
                      std::to_string(state_.options.max_header_bytes) + ") together with the header");
    case RequestParser::Refusal::DuplicateHost:
      return fail(http::status::bad_request, "the request has more than one Host header");
    case RequestParser::Refusal::UnsupportedTransferCoding:
      return fail(http::status::not_implemented,
                  "only the \"chunked\" transfer coding is supported (no gzip or deflate)");
    case RequestParser::Refusal::None:
      break;
  }
  if (ec == http::error::body_limit) {
    return fail(http::status::payload_too_large,
                "the request body exceeds " + std::to_string(state_.options.max_body_bytes) + " bytes");
  }
  if (ec == http::error::header_limit) {
    return fail(http::status::request_header_fields_too_large, "the request headers are too large");
  }
  if (ec == http::error::buffer_overflow) {
    // Only a header or trailer kept whole in the buffer can fill it.
    return fail(http::status::request_header_fields_too_large,
                "the request headers or trailers exceed max_header_bytes (" +
                    std::to_string(state_.options.max_header_bytes) + ")");
  }
  fail(http::status::bad_request, "malformed HTTP request: " + ec.message());
}

// Host check, CORS preflight, API key, in that order: a preflight carries no credentials, and
// /health stays public so supervisors can probe it.
template <class Protocol>
bool HttpSession<Protocol>::check_access(const Request& req) {
  const ServerOptions& o = state_.options;
  if (check_host_) {
    const auto host = header(req, http::field::host);
    if (!host_header_allowed(host, o.allowed_hosts)) {
      send_error(http::status::forbidden,
                 "the Host header " + quoted(host.value_or("")) +
                     " is not allowed: this server is bound to loopback and answers only to localhost names "
                     "and addresses (add the name to allowed_hosts to accept it)",
                 "invalid_request_error", {}, "host_not_allowed");
      return false;
    }
  }
  remember_cors_origin(req);
  const auto origin = header(req, http::field::origin);
  if (req.method() == http::verb::options && origin) {
    answer_preflight(req);
    return false;
  }
  if (!request_origin_allowed(origin, header(req, http::field::host), o.cors_origins)) {
    send_error(http::status::forbidden,
               "requests from the web page at " + quoted(origin.value_or("")) +
                   " are not allowed (the server's cors_origins does not list it)",
               "invalid_request_error", {}, "cors_origin_not_allowed");
    return false;
  }
  if (endpoint_ == Endpoint::Health && req.method() == http::verb::get) return true;
  if (!o.api_keys.empty()) {
    const auto presented = presented_api_keys(header(req, http::field::authorization), header(req, "X-Api-Key"));
    if (!api_key_accepted(presented, o.api_keys)) {
      Response res{http::status::unauthorized, version_};
      res.set(http::field::www_authenticate, "Bearer");
      res.set(http::field::content_type, "application/json");
      res.body() = json_text(error_body(presented.empty() ? "an API key is required: send 'Authorization: Bearer KEY' or "
                                                  "'X-Api-Key: KEY'"
                                                : "the API key is not valid",
                              "invalid_request_error", {}, "invalid_api_key"));
      send(std::move(res));
      return false;
    }
  }
  return true;
}

template <class Protocol>
void HttpSession<Protocol>::remember_cors_origin(const http::fields& fields) {
  const auto origin = header(fields, http::field::origin);
  if (origin && origin_allowed(*origin, state_.options.cors_origins)) cors_origin_ = *origin;
}

template <class Protocol>
void HttpSession<Protocol>::answer_preflight(const Request& req) {
  if (cors_origin_.empty()) {
    const auto origin = header(req, http::field::origin);
    return send_error(http::status::forbidden,
                      "cross-origin requests from " + quoted(origin.value_or("")) +
                          " are not allowed (the server's cors_origins does not list it)",
                      "invalid_request_error", {}, "cors_origin_not_allowed");
  }
  Response res{http::status::no_content, version_};
  res.set(http::field::access_control_allow_methods, kCorsAllowMethods);
  res.set(http::field::access_control_allow_headers,
          preflight_allow_headers(header(req, http::field::access_control_request_headers)));
  res.set(http::field::access_control_max_age, kCorsMaxAgeSeconds);
  send(std::move(res));
}

template <class Protocol>
void HttpSession<Protocol>::handle_request(const Request& req) {
  const std::string_view path = path_of(req.target());
  if (state_.stopping.load()) {
    return send_unavailable("the server is shutting down", "server_shutdown", nullptr, /*close=*/true);
  }
  if (!check_access(req)) return;
  auto only = [&](http::verb verb) {
    if (req.method() == verb) return true;
    Response res{http::status::method_not_allowed, version_};
    res.set(http::field::allow, http::to_string(verb));
    res.set(http::field::content_type, "application/json");
    res.body() = json_text(error_body("method " + std::string(req.method_string()) + " is not allowed on " +
                                std::string(path),
                            "invalid_request_error"));
    send(std::move(res));
    return false;
  };
  EngineWorker* engine = state_.ready_engine();
  auto loaded = [&] {
    if (engine) return true;
    send_unavailable("the model is still loading; retry shortly", "model_loading", "5");
    return false;
  };

  switch (endpoint_) {
    case Endpoint::Health:
      if (!only(http::verb::get)) return;
      if (engine) return send_json(http::status::ok, json{{"status", "ok"}});
      return send_json(http::status::service_unavailable, json{{"status", "loading"}});
    case Endpoint::Metrics:
      if (only(http::verb::get)) handle_metrics();
      return;
    case Endpoint::Models:
      if (!only(http::verb::get)) return;
      {
        json list = model_list(state_.options.model_id, state_.created);
        for (auto& m : list["data"]) m = describe_model(std::move(m), state_.options);
        return send_json(http::status::ok, list);
      }
    case Endpoint::Model: {
      if (!only(http::verb::get)) return;
      const std::string_view id = path.substr(std::string_view("/v1/models/").size());
      if (id == state_.options.model_id) {
        return send_json(http::status::ok,
                         describe_model(model_object(state_.options.model_id, state_.created), state_.options));
      }
      return send_error(http::status::not_found, "the model " + quoted(id) + " does not exist",
                        "invalid_request_error", "model", "model_not_found");
    }
    case Endpoint::Completions:
      if (only(http::verb::post) && loaded()) handle_completion(req, /*chat=*/false, *engine);
      return;
    case Endpoint::ChatCompletions:
      if (only(http::verb::post) && loaded()) handle_completion(req, /*chat=*/true, *engine);
      return;
    case Endpoint::Tokenize:
      if (only(http::verb::post) && loaded()) handle_tokenize(req, /*detokenize=*/false, *engine);
      return;
    case Endpoint::Detokenize:
      if (only(http::verb::post) && loaded()) handle_tokenize(req, /*detokenize=*/true, *engine);
      return;
    case Endpoint::Other:
      break;
  }
  send_error(http::status::not_found, "no route for " + quoted(path), "invalid_request_error");
}

template <class Protocol>
void HttpSession<Protocol>::handle_metrics() {
  MetricsSnapshot m;
  m.requests = state_.metrics.requests();
  m.http_active_requests = state_.active_requests.load();
  if (EngineWorker* engine = state_.ready_engine()) {
    m.model_loaded = true;
    m.engine = engine->metrics();
  }
  Response res{http::status::ok, version_};
  res.set(http::field::content_type, kPrometheusContentType);
  res.body() = render_prometheus(m);
  send(std::move(res));
}

template <class Protocol>
void HttpSession<Protocol>::offload(std::function<void()> work, std::function<void()> then) {
  if (!state_.offload) {  // no worker pool (unit tests): inline
    work();
    return then();
  }
  auto ex = stream_.get_executor();
  state_.offload([ex, work = std::move(work), then = std::move(then), self = this->shared_from_this()]() mutable {
    work();  // catches what it throws (see capture_failure): a worker thread must not end on it
    net::post(ex, [self = std::move(self), then = std::move(then)] { self->run_guarded(then); });
  });
}

// A continuation posted back to the strand: like on_read, nothing it throws may reach Asio. A
// BadRequest is the client's fault (400), anything else ours (500).
template <class Protocol>
void HttpSession<Protocol>::run_guarded(const std::function<void()>& step) {
  try {
    step();
  } catch (const BadRequest& e) {
    if (!writing_ && !streaming_) send_error(http::status::bad_request, e.what(), "invalid_request_error", e.param());
  } catch (const std::exception& e) {
    if (!writing_ && !streaming_) send_error(http::status::internal_server_error, e.what(), "server_error");
  }
}

template <class Protocol>
void HttpSession<Protocol>::handle_tokenize(const Request& req, bool detokenize, EngineWorker& engine) {
  struct Outcome {
    json body;
    std::exception_ptr failure;
  };
  auto outcome = std::make_shared<Outcome>();
  auto body = std::make_shared<std::string>(req.body());
  const size_t max_prompt_bytes = state_.options.limits.max_prompt_bytes;
  offload(
      [outcome, body, detokenize, max_prompt_bytes, &engine] {
        const Tokenizer& tok = engine.model().tokenizer();
        try {
          if (detokenize) {
            outcome->body = detokenize_response(tok, parse_detokenize_request(*body, tok.n_vocab()));
          } else {
            outcome->body = tokenize_response(tok, parse_tokenize_request(*body, max_prompt_bytes));
          }
        } catch (...) {
          outcome->failure = std::current_exception();
        }
      },
      [this, outcome] {
        if (outcome->failure) std::rethrow_exception(outcome->failure);
        send_json(http::status::ok, outcome->body);
      });
}

template <class Protocol>
void HttpSession<Protocol>::handle_completion(const Request& req, bool chat, EngineWorker& engine) {
  CompletionRequest cr;
  try {
    cr = chat ? parse_chat_request(req.body(), state_.options.limits)
              : parse_completion_request(req.body(), state_.options.limits);
  } catch (const BadRequest& e) {
    return send_error(http::status::bad_request, e.what(), "invalid_request_error", e.param());
  }
  submit_completion(std::move(cr), chat, engine);
}

template <class Protocol>
void HttpSession<Protocol>::submit_completion(CompletionRequest request, bool chat, EngineWorker& engine) {
  struct Outcome {
    CompletionRequest request;
    GenerationJob job;
    std::exception_ptr failure;
  };
  auto outcome = std::make_shared<Outcome>();
  outcome->request = std::move(request);
  const ChatTemplate chat_template = state_.chat_template;
  offload(
      [outcome, chat, chat_template, &engine] {
        try {
          outcome->job =
              prepare_completion_job(outcome->request, chat, engine.model(), chat_template, engine.n_ctx());
        } catch (...) {
          outcome->failure = std::current_exception();
        }
      },
      [this, outcome, chat, &engine] {
        if (outcome->failure) std::rethrow_exception(outcome->failure);
        if (state_.stopping.load()) {
          return send_unavailable("the server is shutting down", "server_shutdown", nullptr, /*close=*/true);
        }
        start_completion(std::move(outcome->request), std::move(outcome->job), chat, engine);
      });
}

template <class Protocol>
void HttpSession<Protocol>::start_completion(CompletionRequest cr, GenerationJob job, bool chat,
                                             EngineWorker& engine) {
  cancel_ = std::make_shared<std::atomic<bool>>(false);
  chat_ = chat;
  first_delta_ = true;
  include_usage_ = cr.stream && cr.include_usage;
  completion_id_ = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(state_.next_id.fetch_add(1));
  created_ = unix_now();
  prompt_tokens_ = static_cast<int64_t>(job.prompt.size());
  job.cancelled = cancel_;
  // The engine thread only posts to this connection's strand; a weak pointer, so a connection
  // that is gone is simply not called.
  auto ex = stream_.get_executor();
  std::weak_ptr<HttpSession> weak = this->weak_from_this();
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
  if (!engine.try_submit(std::move(job))) {
    cancel_.reset();
    return send_unavailable("the server is busy (request queue full); retry later", "queue_full", "1");
  }
  arm_request_timer();

  if (!cr.stream) {
    awaiting_engine_ = true;
    watch_for_hangup();
    return;
  }
  // The header goes out at once; keep-alive comments follow while the prompt is evaluated.
  streaming_ = true;
  stream_done_ = false;
  last_chunk_sent_ = false;
  outbox_.clear();
  wire_.clear();
  sse_header_.emplace(http::status::ok, version_);
  sse_header_->set(http::field::server, "ember");
  sse_header_->set(http::field::content_type, "text/event-stream");
  sse_header_->set(http::field::cache_control, "no-cache");
  sse_header_->set("X-Accel-Buffering", "no");  // reverse proxies must not hold events back
  add_cors_headers(*sse_header_);
  // HTTP/1.0 has no chunked coding: the events go out as they are and closing ends the body.
  chunked_stream_ = version_ >= 11;
  if (!chunked_stream_) keep_alive_ = false;
  sse_header_->keep_alive(keep_alive_);
  sse_header_->chunked(chunked_stream_);
  sse_serializer_.emplace(*sse_header_);
  state_.metrics.record(endpoint_, 200);
  writing_ = true;
  last_write_ = std::chrono::steady_clock::now();
  stream_.expires_after(state_.options.io_timeout);
  http::async_write_header(stream_, *sse_serializer_,
                           beast::bind_front_handler(&HttpSession::on_stream_write, this->shared_from_this()));
  arm_keepalive();
}

template <class Protocol>
void HttpSession<Protocol>::arm_request_timer() {
  request_timer_.expires_after(state_.options.request_timeout);
  request_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
    if (ec) return;  // cancelled: the result arrived
    // The whole request took too long: stop the generation and drop the connection.
    self->drop_connection();
  });
}

template <class Protocol>
void HttpSession<Protocol>::watch_for_hangup() {
  if (watching_hangup_) return;
  watching_hangup_ = true;
  stream_.socket().async_wait(net::socket_base::wait_read,
                              beast::bind_front_handler(&HttpSession::on_hangup_watch, this->shared_from_this()));
}

template <class Protocol>
void HttpSession<Protocol>::on_hangup_watch(beast::error_code ec) {
  watching_hangup_ = false;
  if (!awaiting_engine_ || ec == net::error::operation_aborted) return;
  if (!ec) {
    // Readable: either the peer closed (a peek reads 0 bytes) or it pipelined its next request,
    // which stays in the socket for the next read; then there is nothing more to watch.
    char byte = 0;
    const size_t n = stream_.socket().receive(net::buffer(&byte, 1), net::socket_base::message_peek, ec);
    if (!ec && n > 0) return;
  }
  // End of stream or a socket error: nobody is waiting for the answer any more.
  drop_connection();
}

template <class Protocol>
void HttpSession<Protocol>::on_generation_done(std::string text, GenerationStats stats, std::exception_ptr error) {
  if (!awaiting_engine_) return;  // answered already (shutdown) or the connection was dropped
  awaiting_engine_ = false;
  if (watching_hangup_) {
    // Nothing else is pending on the socket now; the watch's handler sees operation_aborted.
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
  }
  request_timer_.cancel();
  cancel_.reset();
  if (error) {
    return send_error(http::status::internal_server_error, failure_message(error), "server_error", {},
                      failure_code(error));
  }
  const auto& model = state_.options.model_id;
  send_json(http::status::ok,
            chat_ ? chat_response(completion_id_, created_, model, text, stats.finish, prompt_tokens_,
                                  stats.generated_tokens)
                  : completion_response(completion_id_, created_, model, text, stats.finish, prompt_tokens_,
                                        stats.generated_tokens));
}

template <class Protocol>
void HttpSession<Protocol>::queue_chunk(json chunk) {
  // With include_usage every chunk carries "usage" (null until the usage chunk), as OpenAI does.
  if (include_usage_ && !chunk.contains("usage")) chunk["usage"] = nullptr;
  outbox_ += sse_event(chunk);
}

template <class Protocol>
void HttpSession<Protocol>::on_stream_text(const std::string& text) {
  if (stream_done_) return;
  const auto& model = state_.options.model_id;
  if (!chat_) {
    queue_chunk(completion_chunk(completion_id_, created_, model, text, std::nullopt));
  } else {
    if (first_delta_) queue_chunk(chat_chunk(completion_id_, created_, model, true, "", std::nullopt));
    first_delta_ = false;
    queue_chunk(chat_chunk(completion_id_, created_, model, false, text, std::nullopt));
  }
  // A reader this far behind would make us buffer without bound: cut it off instead.
  const size_t backlog = outbox_.size() + (writing_ ? wire_.size() : 0);
  if (backlog > state_.options.max_stream_backlog_bytes) return drop_connection();
  pump_stream();
}

template <class Protocol>
void HttpSession<Protocol>::on_stream_done(GenerationStats stats, std::exception_ptr error) {
  request_timer_.cancel();
  if (stream_done_) return;  // ended already (cut off or shut down)
  const auto& model = state_.options.model_id;
  if (error) {
    outbox_ += sse_event(error_body(failure_message(error), "server_error", {}, failure_code(error)));
  } else {
    if (!chat_) {
      queue_chunk(completion_chunk(completion_id_, created_, model, "", stats.finish));
    } else {
      if (first_delta_) queue_chunk(chat_chunk(completion_id_, created_, model, true, "", std::nullopt));
      first_delta_ = false;
      queue_chunk(chat_chunk(completion_id_, created_, model, false, std::nullopt, stats.finish));
    }
    if (include_usage_) {
      json usage_chunk = chat_ ? chat_chunk(completion_id_, created_, model, false, std::nullopt, std::nullopt)
                               : completion_chunk(completion_id_, created_, model, "", std::nullopt);
      usage_chunk["choices"] = json::array();
      usage_chunk["usage"] = json{{"prompt_tokens", prompt_tokens_},
                                  {"completion_tokens", stats.generated_tokens},
                                  {"total_tokens", prompt_tokens_ + stats.generated_tokens}};
      queue_chunk(std::move(usage_chunk));
    }
  }
  outbox_ += kSseDone;
  stream_done_ = true;
  pump_stream();
}

template <class Protocol>
void HttpSession<Protocol>::pump_stream() {
  if (writing_) return;
  if (!outbox_.empty()) {
    wire_.swap(outbox_);
    outbox_.clear();
    writing_ = true;
    last_write_ = std::chrono::steady_clock::now();
    stream_.expires_after(state_.options.io_timeout);
    auto on_written = beast::bind_front_handler(&HttpSession::on_stream_write, this->shared_from_this());
    if (chunked_stream_) {
      net::async_write(stream_, http::make_chunk(net::buffer(wire_)), std::move(on_written));
    } else {
      net::async_write(stream_, net::buffer(wire_), std::move(on_written));
    }
  } else if (stream_done_ && !last_chunk_sent_ && !chunked_stream_) {
    last_chunk_sent_ = true;  // nothing ends an HTTP/1.0 body but the close below
    pump_stream();
  } else if (stream_done_ && !last_chunk_sent_) {
    last_chunk_sent_ = true;
    writing_ = true;
    stream_.expires_after(state_.options.io_timeout);
    net::async_write(stream_, http::make_chunk_last(),
                     beast::bind_front_handler(&HttpSession::on_stream_write, this->shared_from_this()));
  } else if (last_chunk_sent_) {
    stop_stream_timers();
    streaming_ = false;
    cancel_.reset();
    sse_serializer_.reset();
    sse_header_.reset();
    end_request();
    if (keep_alive_) return do_read();
    do_close();
  }
}

template <class Protocol>
void HttpSession<Protocol>::on_stream_write(beast::error_code ec, size_t) {
  writing_ = false;
  if (ec) {
    // The client is gone: stop generating for it; the session ends when nothing holds it.
    if (cancel_) cancel_->store(true);
    stream_done_ = true;
    request_timer_.cancel();
    stop_stream_timers();
    return;
  }
  pump_stream();
}

template <class Protocol>
void HttpSession<Protocol>::arm_keepalive() {
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      state_.options.keepalive_interval);
  if (interval.count() <= 0 || stream_done_) return;
  // Due one interval after the last write; while a write is stuck, check again an interval later.
  const auto now = std::chrono::steady_clock::now();
  keepalive_timer_.expires_at(writing_ ? now + interval : std::max(last_write_ + interval, now));
  keepalive_timer_.async_wait(beast::bind_front_handler(&HttpSession::on_keepalive, this->shared_from_this()));
}

template <class Protocol>
void HttpSession<Protocol>::on_keepalive(beast::error_code ec) {
  if (ec || !streaming_ || stream_done_) return;
  const auto interval = state_.options.keepalive_interval;
  if (!writing_ && outbox_.empty() && std::chrono::steady_clock::now() - last_write_ >= interval) {
    outbox_ = kSseKeepAlive;
    pump_stream();
  }
  arm_keepalive();
}

template <class Protocol>
void HttpSession<Protocol>::stop_stream_timers() {
  keepalive_timer_.cancel();
}

template <class Protocol>
void HttpSession<Protocol>::on_shutdown() {
  keep_alive_ = false;
  const json shutdown_error = error_body("the server is shutting down", "server_error", {}, "server_shutdown");
  if (streaming_ && !stream_done_) {
    if (cancel_) cancel_->store(true);
    request_timer_.cancel();
    outbox_ += sse_event(shutdown_error);
    outbox_ += kSseDone;
    stream_done_ = true;
    pump_stream();
  } else if (awaiting_engine_) {
    awaiting_engine_ = false;
    if (cancel_) cancel_->store(true);
    request_timer_.cancel();
    send_unavailable("the server is shutting down", "server_shutdown", nullptr, /*close=*/true);
  } else if (!in_request_) {
    drop_connection();  // idle keep-alive connection
  }
  // Otherwise a response is being written; the connection closes after it.
}

template <class Protocol>
void HttpSession<Protocol>::add_cors_headers(http::fields& fields) const {
  if (cors_origin_.empty()) return;
  fields.set(http::field::access_control_allow_origin, cors_origin_);
  fields.set(http::field::vary, "Origin");
  fields.set(http::field::access_control_expose_headers, "Retry-After");
}

template <class Protocol>
void HttpSession<Protocol>::send_json(http::status status, const json& body, bool close) {
  Response res{status, version_};
  res.set(http::field::content_type, "application/json");
  res.body() = json_text(body);
  send(std::move(res), close);
}

template <class Protocol>
void HttpSession<Protocol>::send_error(http::status status, const std::string& message, const std::string& type,
                                       const std::string& param, const std::string& code, bool close) {
  send_json(status, error_body(message, type, param, code), close);
}

template <class Protocol>
void HttpSession<Protocol>::send_unavailable(const std::string& message, const std::string& code,
                                             const char* retry_after, bool close) {
  Response res{http::status::service_unavailable, version_};
  if (retry_after) res.set(http::field::retry_after, retry_after);
  res.set(http::field::content_type, "application/json");
  res.body() = json_text(error_body(message, "server_error", {}, code));
  send(std::move(res), close);
}

template <class Protocol>
void HttpSession<Protocol>::send(Response res, bool close) {
  res.set(http::field::server, "ember");
  add_cors_headers(res);
  res.keep_alive(keep_alive_ && !close);
  res.prepare_payload();
  state_.metrics.record(endpoint_, static_cast<int>(res.result_int()));
  const bool will_close = !res.keep_alive();
  auto msg = std::make_shared<Response>(std::move(res));
  response_ = msg;
  writing_ = true;
  stream_.expires_after(state_.options.io_timeout);
  http::async_write(stream_, *msg,
                    beast::bind_front_handler(&HttpSession::on_write, this->shared_from_this(), will_close));
}

template <class Protocol>
void HttpSession<Protocol>::on_write(bool close, beast::error_code ec, size_t) {
  writing_ = false;
  response_.reset();
  end_request();
  if (ec) return;
  if (close) return do_close();
  do_read();
}

template <class Protocol>
void HttpSession<Protocol>::end_request() {
  if (!in_request_) return;
  in_request_ = false;
  state_.active_requests.fetch_sub(1);
}

template <class Protocol>
void HttpSession<Protocol>::do_close() {
  beast::error_code ignored;
  stream_.socket().shutdown(net::socket_base::shutdown_send, ignored);
  drained_bytes_ = 0;
  stream_.expires_after(kLingerTime);  // once for the whole drain, not per read
  buffer_.clear();
  stream_.async_read_some(buffer_.prepare(kDrainChunk),
                          beast::bind_front_handler(&HttpSession::drain, this->shared_from_this()));
}

template <class Protocol>
void HttpSession<Protocol>::drain(beast::error_code ec, size_t bytes) {
  drained_bytes_ += bytes;
  // EOF, the deadline, an error, or a client that keeps sending: the session ends here.
  if (ec || drained_bytes_ > kMaxDrainBytes) return;
  stream_.async_read_some(buffer_.prepare(kDrainChunk),
                          beast::bind_front_handler(&HttpSession::drain, this->shared_from_this()));
}

template <class Protocol>
void HttpSession<Protocol>::drop_connection() {
  if (cancel_) cancel_->store(true);
  awaiting_engine_ = false;
  stream_done_ = true;
  last_chunk_sent_ = true;
  request_timer_.cancel();
  stop_stream_timers();
  beast::error_code ignored;
  stream_.socket().shutdown(net::socket_base::shutdown_both, ignored);
  stream_.close();
  end_request();
}

template class HttpSession<net::ip::tcp>;
template class HttpSession<net::local::stream_protocol>;

}  // namespace ember::server
