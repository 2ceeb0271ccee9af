// Hostile requests at the HTTP layer, over real sockets: each could crash a daemon, bloat it or be
// served when it must not be. After each, the server must still answer /health.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <string>

#include "tests/server/http_test_support.h"

using namespace ember;
using namespace ember::test_http;

namespace {

// Sends raw bytes and reads one response; a connection the server closed without answering
// gives a response with status 0.
Response raw_exchange(uint16_t port, const std::string& bytes) {
  Client c(port);
  net::write(c.stream, net::buffer(bytes));
  try {
    return c.read();
  } catch (const boost::system::system_error&) {
    return Response{};
  }
}

bool healthy(uint16_t port) {
  Client c(port);
  return c.request(http::verb::get, "/health").result() == http::status::ok;
}

std::string chunked_get_with_trailer(const std::string& trailer) {
  return "GET /health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + trailer + "\r\n";
}

// Reads everything until the server closes (an HTTP/1.0 body with no length ends that way).
std::string read_to_close(Client& c) {
  std::string all;
  char buf[4096];
  for (;;) {
    beast::error_code ec;
    c.stream.expires_after(std::chrono::seconds(10));
    const size_t n = c.stream.read_some(net::buffer(buf), ec);
    all.append(buf, n);
    if (ec) break;
  }
  return all;
}

}  // namespace

TEST_CASE("hardening: a trailer field too large for Beast's fields is refused, not fatal") {
  TestServer s;
  const Response res = raw_exchange(s.port(), chunked_get_with_trailer("X: " + std::string(65534, 'a') + "\r\n"));
  CHECK(res.result() == http::status::request_header_fields_too_large);
  CHECK(healthy(s.port()));
}

TEST_CASE("hardening: with a 1 MiB header limit, a 70 kB header value is refused, not fatal") {
  TestServer s([](server::ServerOptions& o) { o.max_header_bytes = 1 << 20; });
  const std::string req =
      "GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + std::string(70000, 'b') + "\r\n\r\n";
  CHECK(raw_exchange(s.port(), req).result() == http::status::request_header_fields_too_large);
  const std::string long_name = "GET /health HTTP/1.1\r\nHost: localhost\r\n" + std::string(70000, 'n') + ": v\r\n\r\n";
  CHECK(raw_exchange(s.port(), long_name).result() == http::status::request_header_fields_too_large);
  CHECK(healthy(s.port()));
}

TEST_CASE("hardening: trailers count against max_header_bytes") {
  TestServer s([](server::ServerOptions& o) { o.max_header_bytes = 16 * 1024; });
  // Small trailers within the budget are read (and dropped).
  CHECK(raw_exchange(s.port(), chunked_get_with_trailer("X-A: 1\r\nX-B: 2\r\n")).result() == http::status::ok);
  // Many small fields that add up past the budget.
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "X-" + std::to_string(i) + ": " + std::string(40, 'v') + "\r\n";
  CHECK(raw_exchange(s.port(), chunked_get_with_trailer(many)).result() ==
        http::status::request_header_fields_too_large);
  // One huge trailer that never ends: the read buffer is bounded, so it stops at the limit.
  {
    Client c(s.port());
    net::write(c.stream, net::buffer(std::string(
                             "GET /health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: ")));
    const std::string block(64 * 1024, 'z');
    beast::error_code ec;
    for (int i = 0; i < 64 && !ec; ++i) net::write(c.stream, net::buffer(block), ec);  // up to 4 MiB
    Response res;
    try {
      res = c.read();
    } catch (const boost::system::system_error&) {
    }
    CHECK(res.result() == http::status::request_header_fields_too_large);
  }
  CHECK(healthy(s.port()));
}

TEST_CASE("hardening: two Host headers are a 400; a transfer coding other than chunked a 501") {
  TestServer s;
  CHECK(raw_exchange(s.port(), "GET /health HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n").result() ==
        http::status::bad_request);
  const Response gz = raw_exchange(
      s.port(), "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n");
  CHECK(gz.result() == http::status::not_implemented);
  check_error_shape(gz);
  CHECK(raw_exchange(s.port(), "GET /health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n")
            .result() == http::status::ok);
  CHECK(healthy(s.port()));
}

TEST_CASE("hardening: a target that is not UTF-8 gets 404/405, not 500") {
  TestServer s;
  const Response post = raw_exchange(s.port(), "POST /v1/models/\xff HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
  CHECK(post.result() == http::status::method_not_allowed);
  check_error_shape(post);
  const Response get = raw_exchange(s.port(), "GET /v1/models/\xff\xfe HTTP/1.1\r\nHost: localhost\r\n\r\n");
  CHECK(get.result() == http::status::not_found);
  check_error_shape(get);
  const Response other = raw_exchange(s.port(), "GET /\xc3\x28 HTTP/1.1\r\nHost: localhost\r\n\r\n");
  CHECK(other.result() == http::status::not_found);
}

TEST_CASE("hardening: a request from a web page whose origin is not allowed is refused before any work") {
  TestServer s;
  const std::string body = R"({"prompt":"once upon a time","max_tokens":4})";
  {
    Client c(s.port());
    // A "simple" cross-origin request: browsers send it without a preflight.
    auto res = c.request(http::verb::post, "/v1/completions", body,
                         {{"Origin", "http://evil.example"}, {"Content-Type", "text/plain"}});
    CHECK(res.result() == http::status::forbidden);
    CHECK(body_json(res)["error"]["code"] == "cors_origin_not_allowed");
  }
  CHECK(s.engine->metrics().generated_tokens == 0);
  {
    // A page the server itself served (same origin) needs no CORS.
    Client c(s.port());
    const std::string own = "127.0.0.1:" + std::to_string(s.port());
    auto res = c.request(http::verb::post, "/v1/completions", body, {{"Host", own}, {"Origin", "http://" + own}});
    CHECK(res.result() == http::status::ok);
  }
  // Without Origin (curl, SDKs) nothing changes.
  Client c(s.port());
  CHECK(c.request(http::verb::post, "/v1/completions", body).result() == http::status::ok);
}

TEST_CASE("hardening: an HTTP/1.0 stream is not chunked and ends by closing") {
  TestServer s;
  Client c(s.port());
  const std::string body = R"({"prompt":"once upon a time","max_tokens":4,"stream":true})";
  const std::string req = "POST /v1/completions HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  net::write(c.stream, net::buffer(req));
  const std::string all = read_to_close(c);
  const size_t head_end = all.find("\r\n\r\n");
  REQUIRE(head_end != std::string::npos);
  const std::string head = all.substr(0, head_end);
  CAPTURE(head);
  CHECK(head.rfind("HTTP/1.0 200", 0) == 0);
  CHECK(head.find("chunked") == std::string::npos);
  const std::string events = all.substr(head_end + 4);
  const auto payloads = sse_payloads(events);
  REQUIRE(!payloads.empty());
  CHECK(payloads.back() == "[DONE]");
  // Plain responses to HTTP/1.0 speak HTTP/1.0 too.
  Client plain(s.port());
  net::write(plain.stream, net::buffer(std::string("GET /health HTTP/1.0\r\n\r\n")));
  CHECK(read_to_close(plain).rfind("HTTP/1.0 200", 0) == 0);
}

TEST_CASE("hardening: every answer to an HTTP/1.0 request speaks HTTP/1.0, refusals included") {
  TestServer s([](server::ServerOptions& o) { o.api_keys = {"sesame"}; });
  const std::string key = "Authorization: Bearer sesame\r\n";
  const std::pair<std::string, int> cases[] = {
      {"GET /nowhere HTTP/1.0\r\n" + key + "\r\n", 404},
      {"POST /health HTTP/1.0\r\n" + key + "Content-Length: 0\r\n\r\n", 405},
      {"GET /v1/models HTTP/1.0\r\n\r\n", 401},
      {"POST /v1/completions HTTP/1.0\r\n" + key + "Content-Length: 3\r\n\r\n{x}", 400},
      {"POST /v1/completions HTTP/1.0\r\nContent-Length: 999999\r\n\r\n", 413},
      {"GET /health HTTP/1.0\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n", 431},
  };
  for (const auto& [request, status] : cases) {
    CAPTURE(status);
    Client c(s.port());
    net::write(c.stream, net::buffer(request));
    const std::string all = read_to_close(c);
    CHECK(all.rfind("HTTP/1.0 " + std::to_string(status), 0) == 0);
  }
  CHECK(healthy(s.port()));
}

TEST_CASE("hardening: tokenizing a long text does not hold up /health") {
  TestServer s([](server::ServerOptions& o) {
    o.max_body_bytes = 4 << 20;
    o.limits.max_prompt_bytes = 4 << 20;
  });
  const std::string text(2 << 20, 'a');
  const std::string body = json{{"content", text + " the end"}}.dump();
  auto tokenized = std::async(std::launch::async, [&] {
    Client c(s.port());
    const auto res = c.request(http::verb::post, "/tokenize", body);
    return std::make_pair(res.result(), std::chrono::steady_clock::now());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the tokenize request is in
  Client h(s.port());
  CHECK(h.request(http::verb::get, "/health").result() == http::status::ok);
  const auto health_done = std::chrono::steady_clock::now();
  const auto [status, tokenize_done] = tokenized.get();
  CHECK(status == http::status::ok);
  // One I/O thread: had it tokenized, /health would have waited for it.
  CHECK(health_done < tokenize_done);
}
