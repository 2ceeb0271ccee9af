#pragma once
// Shared by the daemon's end-to-end tests: a tiny synthetic model, a real server on an ephemeral
// port (or a Unix socket) and a small synchronous Beast client for either transport.
#include <doctest/doctest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "server/engine_worker.h"
#include "server/http_server.h"
#include "tests/server/tiny_model.h"

namespace ember::test_http {
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using local_stream = net::local::stream_protocol;
using nlohmann::json;
using Response = http::response<http::string_body>;
using Headers = std::vector<std::pair<std::string, std::string>>;

using test_server::test_dir;
using test_server::tiny_model_path;

inline std::unique_ptr<server::EngineWorker> make_engine(size_t max_queued = 4) {
  server::EngineOptions eo;
  eo.threads = 1;
  eo.context.n_ctx = 256;
  eo.max_queued_jobs = max_queued;
  eo.slots = 1;
  return std::make_unique<server::EngineWorker>(Model::load(tiny_model_path()), eo);
}

inline server::ServerOptions test_options() {
  server::ServerOptions so;
  so.port = 0;
  so.model_id = "tiny";
  so.max_body_bytes = 4096;
  return so;
}

struct TestServer {
  explicit TestServer(size_t max_queued = 4, const std::function<void(server::ServerOptions&)>& configure = {}) {
    engine = make_engine(max_queued);
    server::ServerOptions so = test_options();
    if (configure) configure(so);
    http_server = std::make_unique<server::HttpServer>(*engine, so);
    http_server->start();
  }
  explicit TestServer(const std::function<void(server::ServerOptions&)>& configure) : TestServer(4, configure) {}
  ~TestServer() { http_server->stop(std::chrono::seconds(1)); }
  uint16_t port() const { return http_server->port(); }

  std::unique_ptr<server::EngineWorker> engine;
  std::unique_ptr<server::HttpServer> http_server;
};

template <class Protocol>
struct BasicClient {
  explicit BasicClient(const typename Protocol::endpoint& endpoint) : stream(ioc) {
    stream.expires_after(std::chrono::seconds(10));
    stream.connect(endpoint);
  }
  // `headers` are added (or replace the default Host: 127.0.0.1); an empty value removes one.
  Response request(http::verb verb, const std::string& target, const std::string& body = {},
                   const Headers& headers = {}) {
    send(verb, target, body, headers);
    return read();
  }
  void send(http::verb verb, const std::string& target, const std::string& body = {}, const Headers& headers = {}) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (!body.empty() || verb == http::verb::post) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
    }
    for (const auto& [name, value] : headers) {
      if (value.empty()) {
        req.erase(name);
      } else {
        req.set(name, value);
      }
    }
    req.prepare_payload();
    stream.expires_after(std::chrono::seconds(10));
    http::write(stream, req);
  }
  Response read() {
    http::response_parser<http::string_body> parser;
    parser.body_limit(16 << 20);
    stream.expires_after(std::chrono::seconds(10));
    http::read(stream, buffer, parser);
    return parser.release();
  }
  net::io_context ioc;
  beast::basic_stream<Protocol> stream;
  beast::flat_buffer buffer;
};

struct Client : BasicClient<tcp> {
  explicit Client(uint16_t port) : BasicClient<tcp>(tcp::endpoint(net::ip::make_address("127.0.0.1"), port)) {}
};
struct UnixClient : BasicClient<local_stream> {
  explicit UnixClient(const std::string& path) : BasicClient<local_stream>(local_stream::endpoint(path)) {}
};

inline json body_json(const Response& res) { return json::parse(res.body()); }

// {"error": {"message", "type", "param", "code"}}
inline void check_error_shape(const Response& res) {
  json j = body_json(res);
  REQUIRE(j.contains("error"));
  CHECK(j["error"]["message"].is_string());
  CHECK(j["error"]["type"].is_string());
  CHECK(j["error"].contains("param"));
  CHECK(j["error"].contains("code"));
}

// The data payloads of an SSE body, in order (comment lines such as ": keep-alive" skipped).
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) throw std::runtime_error("unterminated SSE event: " + body.substr(pos));
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (event.rfind(":", 0) == 0) continue;
    if (event.rfind("data: ", 0) != 0) throw std::runtime_error("not an SSE data event: " + event);
    out.push_back(event.substr(6));
  }
  return out;
}

// A job submitted straight to the engine whose first token blocks the engine thread for `hold`:
// HTTP requests queued behind it wait (deterministically) that long.
inline void occupy_engine(server::EngineWorker& engine, std::chrono::milliseconds hold) {
  server::GenerationJob job;
  job.prompt = engine.model().tokenizer().encode("hello", true, false);
  job.max_tokens = 16;
  job.sampling.temperature = 0;
  auto first = std::make_shared<bool>(true);
  job.on_text = [first, hold](std::string_view) {
    if (*first) std::this_thread::sleep_for(hold);
    *first = false;
  };
  job.on_done = [](const GenerationStats&, std::exception_ptr) {};
  if (!engine.try_submit(std::move(job))) throw std::runtime_error("the engine refused the blocking job");
}

}  // namespace ember::test_http
