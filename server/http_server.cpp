#include "server/http_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <csignal>
#include <future>
#include <thread>
#include <vector>

#include "server/http_session.h"

namespace ember::server {
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {
int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

struct HttpServer::Impl {
  Impl(EngineWorker& engine, ServerOptions options)
      : state(engine, std::move(options), unix_now()), acceptor(ioc), signals(ioc, SIGINT, SIGTERM) {}

  void accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](boost::system::error_code ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;  // closed by stop()
      if (!ec) std::make_shared<HttpSession>(std::move(socket), state)->start();
      accept();  // a failed accept (e.g. out of descriptors) must not stop the server
    });
  }

  ServerState state;
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::signal_set signals;
  std::promise<void> signalled;
  bool signal_seen = false;
  std::vector<std::thread> threads;
  bool stopped = false;
};

HttpServer::HttpServer(EngineWorker& engine, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(options))) {
  const ServerOptions& o = impl_->state.options;
  const Model& model = engine.model();
  impl_->state.chat_template =
      resolve_chat_template(o.chat_template.empty() ? std::nullopt : std::optional<std::string_view>(o.chat_template),
                            model.file().metadata().get_string("tokenizer.chat_template"),
                            model.tokenizer().model_name())
          .family;
  boost::system::error_code ec;
  const auto address = net::ip::make_address(o.host, ec);
  if (ec) throw std::runtime_error("invalid listen address '" + o.host + "': " + ec.message());
  const tcp::endpoint endpoint(address, o.port);
  auto& a = impl_->acceptor;
  auto fail = [&](const char* what) {
    throw std::runtime_error(std::string("cannot ") + what + " " + o.host + ":" + std::to_string(o.port) + ": " +
                             ec.message());
  };
  if (a.open(endpoint.protocol(), ec)) fail("open a socket for");
  if (a.set_option(net::socket_base::reuse_address(true), ec)) fail("set SO_REUSEADDR on");
  if (a.bind(endpoint, ec)) fail("bind");
  if (a.listen(net::socket_base::max_listen_connections, ec)) fail("listen on");
}

HttpServer::~HttpServer() { stop(std::chrono::milliseconds(0)); }

uint16_t HttpServer::port() const {
  boost::system::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

ChatTemplate HttpServer::chat_template() const { return impl_->state.chat_template; }

void HttpServer::start(int io_threads) {
  Impl& s = *impl_;
  s.signals.async_wait([&s](boost::system::error_code ec, int) {
    if (!ec && !s.signal_seen) {
      s.signal_seen = true;
      s.signalled.set_value();
    }
  });
  s.accept();
  for (int i = 0; i < std::max(1, io_threads); ++i) s.threads.emplace_back([&s] { s.ioc.run(); });
}

void HttpServer::wait_for_signal() { impl_->signalled.get_future().wait(); }

void HttpServer::stop(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  // Close the acceptor and the signal wait on the I/O threads (neither is thread-safe).
  std::promise<void> closed;
  net::post(s.ioc, [&s, &closed] {
    boost::system::error_code ignored;
    s.acceptor.close(ignored);
    s.signals.cancel(ignored);
    closed.set_value();
  });
  if (!s.threads.empty()) {
    closed.get_future().wait();
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (s.state.active_requests.load() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // No engine callback may run after the io_context is gone, so the engine stops first.
  s.state.engine.stop();
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace ember::server
