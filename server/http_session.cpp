#include "server/http_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "server/access_gate.h"
#include "server/openai_api.h"
#include "server/peer_probe.h"
#include "server/read_refusal.h"
#include "server/router.h"

namespace ember::server {
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

namespace {

// Lingering close (see do_close): how long and how much of a refused upload is read and dropped.
constexpr std::chrono::seconds kLingerTime{2};
constexpr size_t kDrainChunk = 64 * 1024;
constexpr size_t kMaxDrainBytes = 64 * 1024 * 1024;

// Who is at the other end, for the log: the client's address, or the Unix socket it came in on
// (its own end is usually unnamed).
std::string describe_peer(const net::ip::tcp::socket& socket) {
  beast::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  if (ec) return "an unknown TCP client";
  std::ostringstream out;
  out << remote;
  return out.str();
}

std::string describe_peer(const net::local::stream_protocol::socket& socket) {
  beast::error_code ec;
  const auto local = socket.local_endpoint(ec);
  return ec ? std::string("a Unix socket client") : "unix:" + local.path();
}

}  // namespace

template <class Protocol>
HttpSession<Protocol>::HttpSession(typename Protocol::socket&& socket, ServerState& state, bool check_host)
    : stream_(std::move(socket)),
      // A header (or trailer) may fill it up to the limit, plus one read's worth of what follows.
      buffer_(state.options.max_header_bytes + kDrainChunk),
      state_(state),
      ctx_(state, check_host),
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
  peer_ = describe_peer(stream_.socket());
  registry_id_ = state_.sessions.add(this->weak_from_this());
  net::dispatch(stream_.get_executor(), guard(&HttpSession::do_read));
}

template <class Protocol>
void HttpSession<Protocol>::begin_shutdown() {
  net::post(stream_.get_executor(), guard(&HttpSession::on_shutdown));
}

// ---- failures -------------------------------------------------------------------------------

template <class Protocol>
template <class Step>
void HttpSession<Protocol>::guarded(Step&& step) noexcept {
  try {
    step();
  } catch (const BadRequest& e) {
    answer_failure(http::status::bad_request, e.what(), "invalid_request_error", e.param());
  } catch (const std::exception& e) {
    answer_failure(http::status::internal_server_error, e.what(), "server_error");
  } catch (...) {
    answer_failure(http::status::internal_server_error, "an unexpected error", "server_error");
  }
}

// A handler Asio may call: the member function run through guarded(), with the session kept alive.
template <class Protocol>
template <class... Args>
auto HttpSession<Protocol>::guard(void (HttpSession::*step)(Args...)) {
  return [self = this->shared_from_this(), step](Args... args) {
    self->guarded([&] { (self.get()->*step)(args...); });
  };
}

// A request read whole whose answer has not begun: a failure can still be its answer.
template <class Protocol>
bool HttpSession<Protocol>::can_answer() const {
  return in_request_ && !abandoned_ && !response_ && sse_.state() == SseStream::State::Idle;
}

template <class Protocol>
void HttpSession<Protocol>::answer_failure(http::status status, const std::string& message, const std::string& type,
                                           const std::string& param) noexcept {
  if (!can_answer()) return abandon(message);
  try {
    awaiting_engine_ = false;
    stop_generation();
    send(error_response(status, message, type, param));
  } catch (const std::exception& e) {
    abandon(std::string("answering a failed request: ") + e.what());
  } catch (...) {
    abandon("answering a failed request");
  }
}

// Once a response is (partly) written nothing can be said to the client any more; the operator
// learns what went wrong and the connection ends, instead of hanging with a half-written answer.
template <class Protocol>
void HttpSession<Protocol>::abandon(const std::string& what) noexcept {
  if (abandoned_) return;  // the first failure is the one worth reading; the rest follow from it
  abandoned_ = true;
  std::fprintf(stderr, "ember: closing the connection from %s (%s) after an error while answering it: %s\n",
               peer_.c_str(), endpoint_label(ctx_.endpoint), what.c_str());
  drop_connection();
}

// ---- reading --------------------------------------------------------------------------------

template <class Protocol>
void HttpSession<Protocol>::do_read() {
  parser_.emplace(static_cast<std::uint32_t>(state_.options.max_header_bytes), state_.options.max_body_bytes);
  stream_.expires_after(state_.options.io_timeout);
  http::async_read(stream_, buffer_, *parser_, guard(&HttpSession::on_read));
}

template <class Protocol>
void HttpSession<Protocol>::begin_request() {
  in_request_ = true;
  state_.active_requests.fetch_add(1);
  ctx_.endpoint = Endpoint::Other;
  ctx_.models = nullptr;
  ctx_.lease.reset();
  ctx_.cors_origin.clear();
}

template <class Protocol>
void HttpSession<Protocol>::end_request() {
  if (!in_request_) return;
  in_request_ = false;
  state_.active_requests.fetch_sub(1);
  ctx_.lease.reset();  // the model's keep-alive starts once its generation (the job's copy) ends too
}

template <class Protocol>
void HttpSession<Protocol>::on_read(beast::error_code ec, size_t) {
  if (ec == http::error::end_of_stream) return do_close();
  ctx_.endpoint = Endpoint::Other;
  if (ec) return refuse_unreadable_request(ec);
  begin_request();
  Request req = parser_->release();
  keep_alive_ = req.keep_alive();
  version_ = response_version(req.version());
  route(req, ctx_, *this);
}

// The parser stopped before a whole request was read: say why when there is something to say,
// then close (the rest of the connection's bytes cannot be trusted to start a new request).
template <class Protocol>
void HttpSession<Protocol>::refuse_unreadable_request(beast::error_code ec) {
  auto answer = unreadable_request_response(ec, parser_->refusal(), state_.options);
  if (!answer) return;  // timeout, reset, ...: nothing to answer; the session ends
  begin_request();
  // The request line is parsed as soon as it is complete, before the rest of the header.
  version_ = response_version(parser_->request_line_parsed() ? parser_->get().version() : kHttp11);
  // A declared Content-Length over the limit is refused while the header is being finished, so
  // the parser does not count the header as done yet; it was read all the same.
  if (parser_->is_header_done() || ec == http::error::body_limit) {
    const Request& partial = parser_->get();
    ctx_.endpoint = endpoint_of(path_of(partial.target()));
    ctx_.cors_origin = allowed_cors_origin(partial, state_.options);  // so a page can read why
  }
  send(std::move(*answer), /*close=*/true);
}

// ---- whole responses ------------------------------------------------------------------------

template <class Protocol>
void HttpSession<Protocol>::add_cors_headers(http::fields& fields) const {
  if (ctx_.cors_origin.empty()) return;
  fields.set(http::field::access_control_allow_origin, ctx_.cors_origin);
  fields.set(http::field::vary, "Origin");
  fields.set(http::field::access_control_expose_headers, "Retry-After");
}

template <class Protocol>
void HttpSession<Protocol>::send(Response res, bool close) {
  res.version(version_);  // before keep_alive(): what it writes depends on the version
  res.set(http::field::server, "ember");
  add_cors_headers(res);
  res.keep_alive(keep_alive_ && !close);
  res.prepare_payload();
  // The answer is whole: its model may go idle now (a client may name the next model at once).
  ctx_.lease.reset();
  const bool will_close = !res.keep_alive();
  response_ = std::make_shared<Response>(std::move(res));
  state_.metrics.record(ctx_.endpoint, static_cast<int>(response_->result_int()));
  stream_.expires_after(state_.options.io_timeout);
  http::async_write(stream_, *response_, [self = this->shared_from_this(), will_close](beast::error_code ec, size_t n) {
    self->guarded([&] { self->on_write(will_close, ec, n); });
  });
}

template <class Protocol>
void HttpSession<Protocol>::on_write(bool close, beast::error_code ec, size_t) {
  response_.reset();
  end_request();
  if (ec) return;  // the client is gone; the session ends when nothing holds it
  if (close) return do_close();
  do_read();
}

// ---- generations ----------------------------------------------------------------------------

template <class Protocol>
void HttpSession<Protocol>::offload(std::function<void()> work, std::function<void()> then) {
  if (!state_.offload) {  // no worker pool (unit tests): inline
    work();
    return then();
  }
  auto ex = stream_.get_executor();
  state_.offload([ex, work = std::move(work), then = std::move(then), self = this->shared_from_this()]() mutable {
    work();  // catches what it throws (Responder::offload): a worker thread must not end on it
    net::post(ex, [self = std::move(self), then = std::move(then)] { self->guarded(then); });
  });
}

template <class Protocol>
std::function<void(std::function<void()>)> HttpSession<Protocol>::poster() {
  // Holds the session: while a request waits for its model nothing else may (no read or write is
  // pending), and the registry calls back exactly once, so the hold always ends.
  auto ex = stream_.get_executor();
  return [ex, self = this->shared_from_this()](std::function<void()> work) {
    net::post(ex, [self, work = std::move(work)] { self->guarded(work); });
  };
}

template <class Protocol>
void HttpSession<Protocol>::run_generation(EngineWorker& engine, GenerationJob job,
                                           std::shared_ptr<CompletionEvents> events) {
  cancel_ = std::make_shared<std::atomic<bool>>(false);
  events_ = std::move(events);
  job.cancelled = cancel_;
  // The engine thread only posts to this connection's strand; a weak pointer, so a connection
  // that is gone is simply not called.
  auto ex = stream_.get_executor();
  std::weak_ptr<HttpSession> weak = this->weak_from_this();
  if (events_->streaming()) {
    job.on_text = [ex, weak](std::string_view text) {
      net::post(ex, [weak, t = std::string(text)] {
        if (auto self = weak.lock()) self->guarded([&] { self->on_stream_text(t); });
      });
    };
    // Posted before the token's text, so the text event carries it.
    job.on_logprobs = [ex, weak](TokenLogprobs lp) {
      net::post(ex, [weak, lp = std::move(lp)]() mutable {
        if (auto self = weak.lock()) self->guarded([&] { self->events_->logprobs(std::move(lp)); });
      });
    };
    job.on_prompt_logprobs = [ex, weak](std::vector<TokenLogprobs> prompt) {
      net::post(ex, [weak, prompt = std::move(prompt)]() mutable {
        if (auto self = weak.lock()) self->guarded([&] { self->events_->prompt_logprobs(std::move(prompt)); });
      });
    };
    job.on_choice_end = [ex, weak](const GenerationStats& stats) {
      net::post(ex, [weak, stats] {
        if (auto self = weak.lock()) self->guarded([&] { self->on_stream_choice_end(stats); });
      });
    };
    job.on_done = [ex, weak](const GenerationStats& stats, std::exception_ptr error) {
      net::post(ex, [weak, stats, error] {
        if (auto self = weak.lock()) self->guarded([&] { self->on_stream_done(stats, error); });
      });
    };
  } else {
    // Written only by the engine thread until on_done hands them over: the finished choices, then
    // the current one at the back.
    auto choices = std::make_shared<std::vector<ChoiceResult>>(1);
    choices->reserve(static_cast<size_t>(std::max(1, job.choices)) * (1 + job.later_prompts.size()));
    job.on_text = [choices](std::string_view t) { choices->back().text.append(t); };
    job.on_prompt_logprobs = [choices](std::vector<TokenLogprobs> prompt) {
      choices->back().prompt_logprobs = std::move(prompt);
    };
    job.on_logprobs = [choices](TokenLogprobs lp) { choices->back().logprobs.push_back(std::move(lp)); };
    job.on_choice_end = [choices](const GenerationStats& stats) {
      choices->back().stats = stats;
      choices->emplace_back();
    };
    job.on_done = [ex, weak, choices](const GenerationStats& stats, std::exception_ptr error) {
      choices->back().stats = stats;
      net::post(ex, [weak, choices, error] {
        if (auto self = weak.lock()) {
          self->guarded([&] { self->on_generation_done(std::move(*choices), error); });
        }
      });
    };
  }
  if (!engine.try_submit(std::move(job))) {
    cancel_.reset();
    return send(unavailable_response("the server is busy (request queue full); retry later", "queue_full", "1"));
  }
  arm_request_timer();
  if (events_->streaming()) return start_stream();
  awaiting_engine_ = true;
  watch_for_hangup();
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
void HttpSession<Protocol>::stop_generation() {
  if (cancel_) cancel_->store(true);
  request_timer_.cancel();
}

template <class Protocol>
void HttpSession<Protocol>::watch_for_hangup() {
  if (watching_hangup_) return;
  watching_hangup_ = true;
  stream_.socket().async_wait(net::socket_base::wait_read, guard(&HttpSession::on_hangup_watch));
}

template <class Protocol>
void HttpSession<Protocol>::on_hangup_watch(beast::error_code ec) {
  watching_hangup_ = false;
  if (!awaiting_engine_ || ec == net::error::operation_aborted) return;
  if (!ec) {
    // Readable: the peer closed, or pipelined its next request (it stays in the socket for the
    // next read; nothing more to watch), or the wake-up was stale (probe_peer says why that is
    // common): keep watching.
    switch (probe_peer(stream_.socket())) {
      case PeerActivity::Quiet:
        return watch_for_hangup();
      case PeerActivity::Sent:
        return;
      case PeerActivity::Gone:
        break;
    }
  }
  // End of stream or a socket error: nobody is waiting for the answer any more.
  drop_connection();
}

template <class Protocol>
void HttpSession<Protocol>::on_generation_done(std::vector<ChoiceResult> choices, std::exception_ptr error) {
  if (!awaiting_engine_) return;  // answered already (shutdown) or the connection was dropped
  awaiting_engine_ = false;
  if (watching_hangup_) {
    // Nothing else is pending on the socket now; the watch's handler sees operation_aborted.
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
  }
  request_timer_.cancel();
  cancel_.reset();
  send(events_->whole_response(std::move(choices), error));
}

// ---- streams --------------------------------------------------------------------------------

template <class Protocol>
void HttpSession<Protocol>::start_stream() {
  // HTTP/1.0 has no chunked coding: the events go out as they are and closing ends the body.
  const bool chunked = version_ >= kHttp11;
  if (!chunked) keep_alive_ = false;
  sse_header_.emplace(http::status::ok, version_);
  sse_header_->set(http::field::server, "ember");
  sse_header_->set(http::field::content_type, "text/event-stream");
  sse_header_->set(http::field::cache_control, "no-cache");
  sse_header_->set("X-Accel-Buffering", "no");  // reverse proxies must not hold events back
  add_cors_headers(*sse_header_);
  sse_header_->keep_alive(keep_alive_);
  sse_header_->chunked(chunked);
  sse_serializer_.emplace(*sse_header_);
  state_.metrics.record(ctx_.endpoint, 200);
  // The header goes out at once; keep-alive comments follow while the prompt is evaluated.
  sse_.begin(chunked);
  last_write_ = std::chrono::steady_clock::now();
  stream_.expires_after(state_.options.io_timeout);
  http::async_write_header(stream_, *sse_serializer_, guard(&HttpSession::on_stream_write));
  arm_keepalive();
}

template <class Protocol>
void HttpSession<Protocol>::on_stream_text(const std::string& text) {
  if (!sse_.accepting()) return;  // ended already (cut off or shut down)
  sse_.push(events_->text(text));
  // A reader this far behind would make us buffer without bound: cut it off instead.
  if (sse_.backlog() > state_.options.max_stream_backlog_bytes) return drop_connection();
  pump_stream();
}

template <class Protocol>
void HttpSession<Protocol>::on_stream_choice_end(GenerationStats stats) {
  if (!sse_.accepting()) return;  // ended already (cut off or shut down)
  sse_.push(events_->choice_end(stats));
  pump_stream();
}

template <class Protocol>
void HttpSession<Protocol>::on_stream_done(GenerationStats stats, std::exception_ptr error) {
  request_timer_.cancel();
  if (!sse_.accepting()) return;  // ended already (cut off or shut down)
  sse_.finish(events_->done(stats, error));
  pump_stream();
}

template <class Protocol>
void HttpSession<Protocol>::pump_stream() {
  if (const std::string* bytes = sse_.next_write()) {
    last_write_ = std::chrono::steady_clock::now();
    stream_.expires_after(state_.options.io_timeout);
    net::async_write(stream_, net::buffer(*bytes), guard(&HttpSession::on_stream_write));
    return;
  }
  if (sse_.state() == SseStream::State::Done) end_stream();
}

template <class Protocol>
void HttpSession<Protocol>::on_stream_write(beast::error_code ec, size_t) {
  sse_.write_done();
  if (ec) {
    // The client is gone: stop generating for it; the session ends when nothing holds it.
    stop_generation();
    sse_.abort();
    keepalive_timer_.cancel();
    return;
  }
  pump_stream();
}

// The whole body is written: the connection goes on to its next request, or closes.
template <class Protocol>
void HttpSession<Protocol>::end_stream() {
  keepalive_timer_.cancel();
  cancel_.reset();
  sse_serializer_.reset();
  sse_header_.reset();
  sse_.reset();
  end_request();
  if (keep_alive_) return do_read();
  do_close();
}

template <class Protocol>
void HttpSession<Protocol>::arm_keepalive() {
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      state_.options.keepalive_interval);
  if (interval.count() <= 0 || !sse_.accepting()) return;
  // Due one interval after the last write; while a write is stuck, check again an interval later.
  const auto now = std::chrono::steady_clock::now();
  keepalive_timer_.expires_at(sse_.write_in_flight() ? now + interval : std::max(last_write_ + interval, now));
  keepalive_timer_.async_wait(guard(&HttpSession::on_keepalive));
}

template <class Protocol>
void HttpSession<Protocol>::on_keepalive(beast::error_code ec) {
  if (ec || !sse_.accepting()) return;
  if (sse_.quiet() && std::chrono::steady_clock::now() - last_write_ >= state_.options.keepalive_interval) {
    sse_.push(kSseKeepAlive);
    pump_stream();
  }
  arm_keepalive();
}

// ---- ending ---------------------------------------------------------------------------------

template <class Protocol>
void HttpSession<Protocol>::on_shutdown() {
  keep_alive_ = false;
  if (sse_.accepting()) {
    stop_generation();
    sse_.finish(shutdown_events());
    pump_stream();
  } else if (awaiting_engine_) {
    awaiting_engine_ = false;
    stop_generation();
    send(unavailable_response("the server is shutting down", "server_shutdown", nullptr), /*close=*/true);
  } else if (!in_request_) {
    drop_connection();  // idle keep-alive connection
  }
  // Otherwise a response is being written; the connection closes after it.
}

template <class Protocol>
void HttpSession<Protocol>::do_close() {
  beast::error_code ignored;
  stream_.socket().shutdown(net::socket_base::shutdown_send, ignored);
  drained_bytes_ = 0;
  stream_.expires_after(kLingerTime);  // once for the whole drain, not per read
  buffer_.clear();
  stream_.async_read_some(buffer_.prepare(kDrainChunk), guard(&HttpSession::drain));
}

template <class Protocol>
void HttpSession<Protocol>::drain(beast::error_code ec, size_t bytes) {
  drained_bytes_ += bytes;
  // EOF, the deadline, an error, or a client that keeps sending: the session ends here.
  if (ec || drained_bytes_ > kMaxDrainBytes) return;
  stream_.async_read_some(buffer_.prepare(kDrainChunk), guard(&HttpSession::drain));
}

template <class Protocol>
void HttpSession<Protocol>::drop_connection() noexcept {
  awaiting_engine_ = false;
  sse_.abort();
  beast::error_code ignored;
  stream_.socket().shutdown(net::socket_base::shutdown_both, ignored);
  try {
    stop_generation();
    keepalive_timer_.cancel();
    stream_.close();  // the socket and the stream's own timeout timer
  } catch (...) {
    // Closing reports its errors by code on every supported platform; nothing is left to undo.
  }
  end_request();
}

template class HttpSession<net::ip::tcp>;
template class HttpSession<net::local::stream_protocol>;

}  // namespace ember::server
