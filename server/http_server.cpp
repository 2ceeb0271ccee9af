#include "server/http_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <csignal>
#include <cstring>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "server/access_control.h"
#include "server/http_session.h"
#include "server/listen_spec.h"
#include "server/unix_time.h"

namespace ember::server {
namespace net = boost::asio;
using tcp = net::ip::tcp;
using unix_socket = net::local::stream_protocol;

namespace {

// Runs the I/O loop until it is stopped. An exception escaping a handler (a bug: sessions catch
// what they throw, and the request parser never throws) ends only the connection whose handler it
// was, whose state unwinds with it; the daemon logs it and goes on serving everyone else.
void run_io(net::io_context& ioc) {
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ember: a connection ended on an unexpected error: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "ember: a connection ended on an unexpected error\n");
    }
  }
}

// Threads that tokenize prompts, so a 1 MB prompt never holds up an I/O thread (/health stays
// fast). Two: one long prompt does not queue every other request behind it.
constexpr int kRequestWorkers = 2;

// After a failed accept (e.g. out of file descriptors) wait a little instead of spinning.
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(50);
// After the grace period: how long the final error events get to reach their clients.
constexpr auto kShutdownFlush = std::chrono::seconds(1);

class Listener {
 public:
  virtual ~Listener() = default;
  virtual void accept() = 0;
  // Runs on the listener's strand once the I/O threads run (close_from_outside), else directly.
  virtual void close() = 0;
  // Closes on the listener's strand and waits: the acceptor is not thread-safe, and its accept
  // handler may be running on another I/O thread at this moment. Never call it on an I/O thread.
  virtual void close_from_outside() = 0;
  virtual std::string describe() const = 0;
  virtual uint16_t port() const { return 0; }
};

template <class Protocol>
class ProtocolListener final : public Listener {
 public:
  // The acceptor and the retry timer live on one strand, so their handlers (which run on them by
  // default) and close() never run at the same time on two I/O threads.
  ProtocolListener(net::io_context& ioc, ServerState& state, bool check_host)
      : ioc_(ioc),
        state_(state),
        strand_(net::make_strand(ioc)),
        acceptor_(strand_),
        retry_(strand_),
        check_host_(check_host) {}

  void bind(const typename Protocol::endpoint& endpoint, const std::string& name) {
    name_ = name;
    boost::system::error_code ec;
    auto fail = [&](const char* what) {
      throw std::runtime_error(std::string("cannot ") + what + " " + name + ": " + ec.message());
    };
    if (acceptor_.open(endpoint.protocol(), ec)) fail("open a socket for");
    if constexpr (std::is_same_v<Protocol, tcp>) {
      if (acceptor_.set_option(net::socket_base::reuse_address(true), ec)) fail("set SO_REUSEADDR on");
    }
    if (acceptor_.bind(endpoint, ec)) fail("bind");
    bound_ = true;  // from here on the socket file (if any) is ours to remove
    if (acceptor_.listen(net::socket_base::max_listen_connections, ec)) fail("listen on");
    // Recorded now, so callers never query the acceptor while the I/O threads use it.
    description_ = name;
    if constexpr (std::is_same_v<Protocol, tcp>) {
      const auto bound = acceptor_.local_endpoint(ec);
      if (ec) fail("read the bound address of");
      ListenSpec spec;
      spec.host = bound.address().to_string();
      spec.port = port_ = bound.port();
      description_ = spec.to_string();
    }
  }

  void accept() override {
    acceptor_.async_accept(net::make_strand(ioc_), [this](boost::system::error_code ec, typename Protocol::socket socket) {
      if (!acceptor_.is_open()) return;  // closed by stop()
      if (!ec) {
        std::make_shared<HttpSession<Protocol>>(std::move(socket), state_, check_host_)->start();
        return accept();
      }
      retry_.expires_after(kAcceptRetryDelay);
      retry_.async_wait([this](boost::system::error_code wait_ec) {
        if (!wait_ec && acceptor_.is_open()) accept();
      });
    });
  }

  void close() override {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
    if constexpr (std::is_same_v<Protocol, unix_socket>) {
      if (bound_) ::unlink(name_.c_str() + 5);  // the path after "unix:"
    }
    bound_ = false;
  }

  void close_from_outside() override {
    std::promise<void> closed;
    net::post(strand_, [this, &closed] {
      close();
      closed.set_value();
    });
    closed.get_future().wait();
  }

  std::string describe() const override { return description_; }
  uint16_t port() const override { return port_; }

 private:
  net::io_context& ioc_;
  ServerState& state_;
  net::strand<net::io_context::executor_type> strand_;
  typename Protocol::acceptor acceptor_;
  net::steady_timer retry_;
  bool check_host_;
  bool bound_ = false;
  std::string name_;
  std::string description_;
  uint16_t port_ = 0;
};

// A socket file left by a server that died is removed; a live one (something accepts on it) or a
// file that is not a socket is an error, never deleted.
void clear_stale_socket(net::io_context& ioc, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // nothing there
  if (!S_ISSOCK(st.st_mode)) {
    throw std::runtime_error("cannot listen on unix:" + path + ": the file exists and is not a socket");
  }
  unix_socket::socket probe(ioc);
  boost::system::error_code ec;
  probe.connect(unix_socket::endpoint(path), ec);
  if (!ec) throw std::runtime_error("cannot listen on unix:" + path + ": another server is listening there");
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw std::runtime_error("cannot remove the stale socket file " + path + ": " + std::strerror(errno));
  }
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(ServerOptions options) : state(std::move(options), unix_now()), signals(ioc, SIGINT, SIGTERM) {
    state.offload = [this](std::function<void()> work) { net::post(workers, std::move(work)); };
  }

  void listen_on(const ListenSpec& spec) {
    if (spec.kind == ListenSpec::Kind::Unix) {
      clear_stale_socket(ioc, spec.path);
      auto l = std::make_unique<ProtocolListener<unix_socket>>(ioc, state, /*check_host=*/false);
      // Pushed before binding so a later failure still removes the file.
      auto* raw = l.get();
      listeners.push_back(std::move(l));
      raw->bind(unix_socket::endpoint(spec.path), spec.to_string());
      return;
    }
    boost::system::error_code ec;
    // "localhost" is the loopback address, never a name lookup (which could return anything).
    const auto address = net::ip::make_address(spec.host == "localhost" ? "127.0.0.1" : spec.host, ec);
    if (ec) throw std::runtime_error("invalid listen address '" + spec.host + "': " + ec.message());
    auto l = std::make_unique<ProtocolListener<tcp>>(ioc, state, is_loopback_listen_host(address.to_string()));
    l->bind(tcp::endpoint(address, spec.port), spec.to_string());
    listeners.push_back(std::move(l));
  }

  // Before the I/O threads run (or after they stopped): nothing else touches the listeners.
  void close_listeners() {
    for (auto& l : listeners) l->close();
    boost::system::error_code ignored;
    signals.cancel(ignored);
  }

  // While the I/O threads run: each listener closes on its own strand; the signal wait is
  // cancelled on the I/O threads too (its handler never touches the signal_set itself).
  void close_listeners_while_running() {
    for (auto& l : listeners) l->close_from_outside();
    std::promise<void> cancelled;
    net::post(ioc, [this, &cancelled] {
      boost::system::error_code ignored;
      signals.cancel(ignored);
      cancelled.set_value();
    });
    cancelled.get_future().wait();
  }

  // Polls until no request is being answered or the deadline passes.
  bool wait_idle(std::chrono::steady_clock::time_point deadline) const {
    while (state.active_requests.load() > 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  ServerState state;  // declared first: sessions destroyed with the io_context still use it
  // The registry attach(EngineWorker&) makes; after `state`, before `ioc`: outlives the sessions.
  std::unique_ptr<ModelRegistry> own_models;
  net::io_context ioc;
  // Keeps run() going until stop() even when nothing is pending (e.g. every listener failed).
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  // After ioc: work still queued here holds sessions, whose sockets must go before the io_context.
  net::thread_pool workers{kRequestWorkers};
  std::vector<std::unique_ptr<Listener>> listeners;
  net::signal_set signals;
  std::promise<void> signalled;
  std::atomic<bool> signal_seen{false};  // set on an I/O thread, read by signal_received()
  std::vector<std::thread> threads;
  bool stopped = false;
};

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  std::vector<ListenSpec> specs;
  try {
    specs = listen_specs(impl_->state.options);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  try {
    for (const auto& spec : specs) impl_->listen_on(spec);
  } catch (...) {
    impl_->close_listeners();  // removes the socket files already created
    throw;
  }
}

HttpServer::HttpServer(EngineWorker& engine, ServerOptions options) : HttpServer(std::move(options)) {
  attach(engine);
}

HttpServer::~HttpServer() { stop(std::chrono::milliseconds(0)); }

void HttpServer::attach(ModelRegistry& models) {
  ServerState& s = impl_->state;
  if (s.ready_models() != nullptr) throw std::logic_error("HttpServer::attach: models are already attached");
  s.models.store(&models, std::memory_order_release);
}

void HttpServer::attach(EngineWorker& engine) {
  ServerState& s = impl_->state;
  if (s.ready_models() != nullptr) throw std::logic_error("HttpServer::attach: models are already attached");
  const ServerOptions& o = s.options;
  auto served = std::make_unique<ServedModel>();
  served->engine = &engine;
  served->demo = o.demo_model;
  served->chat_template = served_chat_template(o.chat_template, engine.model());
  ModelEntry entry;
  entry.id = o.model_id;
  entry.demo = o.demo_model;
  auto registry = std::make_unique<ModelRegistry>(std::make_unique<ModelCatalog>("", std::vector<ModelEntry>{}, [](const std::string&) {}), RegistryOptions{},
                                                  nullptr, nullptr, [](const std::string&) {});
  registry->adopt(std::move(entry), std::move(served));
  impl_->own_models = std::move(registry);
  attach(*impl_->own_models);
}

bool HttpServer::attached() const { return impl_->state.ready_models() != nullptr; }

uint16_t HttpServer::port() const {
  for (const auto& l : impl_->listeners) {
    if (const uint16_t p = l->port()) return p;
  }
  return 0;
}

std::vector<std::string> HttpServer::endpoints() const {
  std::vector<std::string> out;
  for (const auto& l : impl_->listeners) out.push_back(l->describe());
  return out;
}

void HttpServer::start(int io_threads) {
  Impl& s = *impl_;
  if (s.stopped || !s.threads.empty()) return;
  s.signals.async_wait([&s](boost::system::error_code ec, int) {
    if (!ec && !s.signal_seen.exchange(true)) s.signalled.set_value();
  });
  for (auto& l : s.listeners) l->accept();
  for (int i = 0; i < std::max(1, io_threads); ++i) s.threads.emplace_back([&s] { run_io(s.ioc); });
}

void HttpServer::wait_for_signal() { impl_->signalled.get_future().wait(); }

bool HttpServer::signal_received() const { return impl_->signal_seen.load(); }

void HttpServer::stop(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  s.state.stopping.store(true);
  if (s.threads.empty()) {
    s.close_listeners();  // nothing runs: safe from here
  } else {
    s.close_listeners_while_running();
    const auto grace_end = std::chrono::steady_clock::now() + grace;
    if (!s.wait_idle(grace_end)) {
      // Out of grace: streams end with an error event, waiting requests with 503.
      for (const auto& session : s.state.sessions.live()) session->begin_shutdown();
      s.wait_idle(std::chrono::steady_clock::now() + kShutdownFlush);
    }
  }
  // No engine callback may run after the io_context is gone, so the engines stop first.
  if (ModelRegistry* models = s.state.ready_models()) models->stop();
  s.workers.stop();
  s.workers.join();
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace ember::server
