// The daemon's access control, transports, metrics, tokenizer endpoints, streaming extras and
// shutdown, end to end over real HTTP (TCP and Unix sockets) with a tiny synthetic model.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "tests/server/http_test_support.h"

using namespace ember;
using namespace ember::test_http;

namespace {

const std::string kPrompt = R"({"prompt":"the quick brown fox","max_tokens":8,"temperature":0)";

std::string socket_path(const std::string& name) { return (test_dir() / name).string(); }

// name{labels} -> value, from a Prometheus text body.
std::map<std::string, double> parse_metrics(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

double requests_counted(const std::map<std::string, double>& m, const std::string& endpoint, int status) {
  auto it = m.find("ember_http_requests_total{endpoint=\"" + endpoint + "\",status=\"" + std::to_string(status) + "\"}");
  return it == m.end() ? 0 : it->second;
}

// Reads a streamed response as it arrives until `done(body)` or the stream ends.
struct StreamReader {
  template <class ClientT>
  explicit StreamReader(ClientT& c) {
    parser.body_limit(16 << 20);
    c.stream.expires_after(std::chrono::seconds(10));
    http::read_header(c.stream, c.buffer, parser);
  }
  template <class ClientT>
  bool read_until(ClientT& c, const std::function<bool(const std::string&)>& done) {
    while (!done(parser.get().body())) {
      if (parser.is_done()) return false;
      beast::error_code ec;
      c.stream.expires_after(std::chrono::seconds(10));
      http::read_some(c.stream, c.buffer, parser, ec);
      if (ec) return done(parser.get().body());
    }
    return true;
  }
  http::response_parser<http::string_body> parser;
};

}  // namespace

TEST_CASE("serve: answers before the model is loaded, then serves once attached") {
  auto so = test_options();
  server::HttpServer srv(so);
  srv.start();
  CHECK(!srv.attached());
  Client c(srv.port());
  auto res = c.request(http::verb::get, "/health");
  CHECK(res.result() == http::status::service_unavailable);
  CHECK(body_json(res) == json{{"status", "loading"}});
  for (const char* target : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"}) {
    CAPTURE(target);
    res = c.request(http::verb::post, target, "{}");
    CHECK(res.result() == http::status::service_unavailable);
    CHECK(!res[http::field::retry_after].empty());
    check_error_shape(res);
    CHECK(body_json(res)["error"]["code"] == "model_loading");
  }
  res = c.request(http::verb::get, "/v1/models");
  CHECK(res.result() == http::status::ok);
  res = c.request(http::verb::get, "/metrics");
  CHECK(res.result() == http::status::ok);
  CHECK(parse_metrics(res.body())["ember_model_loaded"] == 0);

  auto engine = make_engine();
  srv.attach(*engine);
  CHECK(srv.attached());
  CHECK_THROWS_AS(srv.attach(*engine), std::logic_error);
  res = c.request(http::verb::get, "/health");
  CHECK(res.result() == http::status::ok);
  CHECK(body_json(res) == json{{"status", "ok"}});
  res = c.request(http::verb::post, "/v1/completions", kPrompt + "}");
  CHECK(res.result() == http::status::ok);
  CHECK(body_json(res)["usage"]["completion_tokens"] == 8);
  srv.stop(std::chrono::seconds(1));
}

TEST_CASE("serve: a listen address that cannot be bound is named in the error") {
  auto so = test_options();
  server::HttpServer first(so);
  so.port = first.port();
  try {
    server::HttpServer second(so);
    FAIL("binding a used port must throw");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("127.0.0.1:" + std::to_string(so.port)) != std::string::npos);
  }
  so.port = 0;
  so.listen = {"nonsense"};
  CHECK_THROWS_AS(server::HttpServer{so}, std::runtime_error);
}

TEST_CASE("serve: Unix domain socket, alone and next to TCP") {
  const std::string path = socket_path("ember-a.sock");
  {
    // A stale socket file from a server that died is replaced.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    ::close(fd);
    REQUIRE(std::filesystem::exists(path));
  }
  {
    TestServer s([&](server::ServerOptions& o) {
      o.tcp = false;
      o.listen = {"unix:" + path};
    });
    CHECK(s.port() == 0);
    CHECK(s.http_server->endpoints() == std::vector<std::string>{"unix:" + path});
    UnixClient c(path);
    // No Host check on a Unix socket: any Host, or none, is fine.
    auto res = c.request(http::verb::get, "/health", {}, {{"Host", "anything.example"}});
    CHECK(res.result() == http::status::ok);
    res = c.request(http::verb::get, "/v1/models", {}, {{"Host", ""}});
    CHECK(res.result() == http::status::ok);
    res = c.request(http::verb::post, "/v1/completions", kPrompt + R"(,"stream":true})", {{"Host", "localhost"}});
    REQUIRE(res.result() == http::status::ok);
    auto payloads = sse_payloads(res.body());
    REQUIRE(payloads.size() >= 2);
    CHECK(payloads.back() == "[DONE]");
    res = c.request(http::verb::post, "/v1/completions", kPrompt + "}");
    CHECK(body_json(res)["usage"]["completion_tokens"] == 8);

    // A second server must not steal a live socket.
    auto so = test_options();
    so.tcp = false;
    so.listen = {"unix:" + path};
    try {
      server::HttpServer second(so);
      FAIL("a live socket must not be replaced");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()).find(path) != std::string::npos);
    }
  }
  CHECK(!std::filesystem::exists(path));  // removed on stop

  // A regular file at the path is never deleted.
  const std::string file = socket_path("not-a-socket");
  std::ofstream(file) << "keep me";
  auto so = test_options();
  so.listen = {"unix:" + file};
  CHECK_THROWS_AS(server::HttpServer{so}, std::runtime_error);
  CHECK(std::filesystem::exists(file));

  // TCP and Unix together.
  const std::string both = socket_path("ember-b.sock");
  TestServer s([&](server::ServerOptions& o) { o.listen = {"unix:" + both, "127.0.0.1:0"}; });
  CHECK(s.http_server->endpoints().size() == 3);
  Client tc(s.port());
  CHECK(tc.request(http::verb::get, "/health").result() == http::status::ok);
  UnixClient uc(both);
  CHECK(uc.request(http::verb::get, "/health").result() == http::status::ok);
}

TEST_CASE("serve: API keys guard everything but /health and CORS preflights") {
  TestServer s([](server::ServerOptions& o) {
    o.api_keys = {"k1", "second-key"};
    o.cors_origins = {"http://app.example"};
  });
  Client c(s.port());
  CHECK(c.request(http::verb::get, "/health").result() == http::status::ok);
  for (const auto& [verb, target] : std::vector<std::pair<http::verb, std::string>>{
           {http::verb::get, "/v1/models"},
           {http::verb::get, "/v1/models/tiny"},
           {http::verb::get, "/metrics"},
           {http::verb::post, "/v1/completions"},
           {http::verb::post, "/v1/chat/completions"},
           {http::verb::post, "/tokenize"},
           {http::verb::get, "/nowhere"}}) {
    CAPTURE(target);
    auto res = c.request(verb, target, verb == http::verb::post ? kPrompt + "}" : "");
    CHECK(res.result() == http::status::unauthorized);
    CHECK(res[http::field::www_authenticate] == "Bearer");
    check_error_shape(res);
    CHECK(body_json(res)["error"]["code"] == "invalid_api_key");
    CHECK(body_json(res)["error"]["type"] == "invalid_request_error");
  }
  auto res = c.request(http::verb::get, "/v1/models", {}, {{"Authorization", "Bearer wrong"}});
  CHECK(res.result() == http::status::unauthorized);
  res = c.request(http::verb::get, "/v1/models", {}, {{"Authorization", "Basic k1"}});
  CHECK(res.result() == http::status::unauthorized);
  res = c.request(http::verb::get, "/v1/models", {}, {{"Authorization", "Bearer k1"}});
  CHECK(res.result() == http::status::ok);
  res = c.request(http::verb::get, "/metrics", {}, {{"X-Api-Key", "second-key"}});
  CHECK(res.result() == http::status::ok);
  res = c.request(http::verb::post, "/v1/completions", kPrompt + "}", {{"authorization", "bearer  second-key"}});
  CHECK(res.result() == http::status::ok);
  // A preflight carries no credentials and is answered before the key check.
  res = c.request(http::verb::options, "/v1/chat/completions", {},
                  {{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "POST"}});
  CHECK(res.result() == http::status::no_content);
  // A 401 to an allowed origin still carries CORS headers, so the page can read the error.
  res = c.request(http::verb::get, "/v1/models", {}, {{"Origin", "http://app.example"}});
  CHECK(res.result() == http::status::unauthorized);
  CHECK(res[http::field::access_control_allow_origin] == "http://app.example");
}

TEST_CASE("serve: Host check on loopback (DNS rebinding), not on other addresses") {
  TestServer s([](server::ServerOptions& o) { o.allowed_hosts = {"myhost.lan"}; });
  Client c(s.port());
  const std::string port = std::to_string(s.port());
  for (const std::string& host : std::vector<std::string>{"127.0.0.1", "127.0.0.1:" + port, "localhost", "localhost:" + port, "[::1]:" + port,
                                 "127.8.9.10", "myhost.lan:" + port, ""}) {
    CAPTURE(host);
    CHECK(c.request(http::verb::get, "/v1/models", {}, {{"Host", host}}).result() == http::status::ok);
  }
  for (const std::string& host : std::vector<std::string>{"evil.example", "evil.example:" + port, "localhost.evil.example", "192.168.0.1"}) {
    CAPTURE(host);
    auto res = c.request(http::verb::get, "/health", {}, {{"Host", host}});
    CHECK(res.result() == http::status::forbidden);
    check_error_shape(res);
    CHECK(body_json(res)["error"]["code"] == "host_not_allowed");
  }
  CHECK(c.request(http::verb::get, "/health").result() == http::status::ok);

  // Bound to all interfaces: no Host check (the operator chose to be reachable by name).
  TestServer open([](server::ServerOptions& o) { o.host = "0.0.0.0"; });
  Client oc(open.port());
  CHECK(oc.request(http::verb::get, "/health", {}, {{"Host", "evil.example"}}).result() == http::status::ok);
}

TEST_CASE("serve: CORS is off by default and answers allowed origins when configured") {
  {
    TestServer s;
    Client c(s.port());
    auto res = c.request(http::verb::get, "/v1/models");
    CHECK(res.result() == http::status::ok);
    CHECK(res.find(http::field::access_control_allow_origin) == res.end());
    CHECK(res.find(http::field::vary) == res.end());
    // A page from another origin is refused outright: CORS off means no page may call.
    res = c.request(http::verb::get, "/v1/models", {}, {{"Origin", "http://app.example"}});
    CHECK(res.result() == http::status::forbidden);
    CHECK(res.find(http::field::access_control_allow_origin) == res.end());
    res = c.request(http::verb::options, "/v1/models", {},
                    {{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "GET"}});
    CHECK(res.result() == http::status::forbidden);
    CHECK(res.find(http::field::access_control_allow_origin) == res.end());
  }
  TestServer s([](server::ServerOptions& o) { o.cors_origins = {"http://app.example"}; });
  Client c(s.port());
  auto res = c.request(http::verb::get, "/v1/models", {}, {{"Origin", "http://app.example"}});
  CHECK(res.result() == http::status::ok);
  CHECK(res[http::field::access_control_allow_origin] == "http://app.example");
  CHECK(res[http::field::vary] == "Origin");
  // Another origin is refused before any work: for a "simple" request (no preflight) the browser
  // would only have hidden the answer, after the server did the work.
  res = c.request(http::verb::get, "/v1/models", {}, {{"Origin", "http://evil.example"}});
  CHECK(res.result() == http::status::forbidden);
  CHECK(res.find(http::field::access_control_allow_origin) == res.end());
  res = c.request(http::verb::options, "/v1/chat/completions", {},
                  {{"Origin", "http://app.example"},
                   {"Access-Control-Request-Method", "POST"},
                   {"Access-Control-Request-Headers", "authorization, content-type, x-stainless-os"}});
  CHECK(res.result() == http::status::no_content);
  CHECK(res[http::field::access_control_allow_origin] == "http://app.example");
  CHECK(res[http::field::access_control_allow_methods].find("POST") != std::string_view::npos);
  CHECK(res[http::field::access_control_allow_headers] == "authorization, content-type, x-stainless-os");
  CHECK(!res[http::field::access_control_max_age].empty());
  CHECK(res.body().empty());
  res = c.request(http::verb::options, "/v1/chat/completions", {},
                  {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  CHECK(res.result() == http::status::forbidden);
  CHECK(res.find(http::field::access_control_allow_origin) == res.end());
  // Streams carry the header too.
  res = c.request(http::verb::post, "/v1/completions", kPrompt + R"(,"stream":true})",
                  {{"Origin", "http://app.example"}});
  CHECK(res.result() == http::status::ok);
  CHECK(res[http::field::access_control_allow_origin] == "http://app.example");

  {
    // A refused body still tells the page why.
    Client big(s.port());
    const std::string head =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://app.example\r\n"
        "Content-Length: 100000\r\n\r\n";
    net::write(big.stream, net::buffer(head));
    res = big.read();
    CHECK(res.result() == http::status::payload_too_large);
    CHECK(res[http::field::access_control_allow_origin] == "http://app.example");
  }

  TestServer any([](server::ServerOptions& o) { o.cors_origins = {"*"}; });
  Client ac(any.port());
  res = ac.request(http::verb::get, "/health", {}, {{"Origin", "https://whoever.example"}});
  CHECK(res[http::field::access_control_allow_origin] == "https://whoever.example");
}

TEST_CASE("serve: /metrics counts every answered request by endpoint and status") {
  TestServer s(/*max_queued=*/4, [](server::ServerOptions& o) { o.api_keys = {"k"}; });
  const Headers key = {{"Authorization", "Bearer k"}};
  Client c(s.port());
  c.request(http::verb::get, "/health");
  c.request(http::verb::get, "/health");
  c.request(http::verb::get, "/v1/models");                        // 401
  c.request(http::verb::get, "/not/a/route", {}, key);              // 404, as "other"
  c.request(http::verb::get, "/v1/models/zzz", {}, key);            // 404
  c.request(http::verb::post, "/v1/completions", "{bad", key);      // 400
  c.request(http::verb::post, "/v1/completions", kPrompt + "}", key);
  c.request(http::verb::post, "/v1/completions", kPrompt + R"(,"stream":true})", key);
  {
    Client big(s.port());
    const std::string head =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n";
    net::write(big.stream, net::buffer(head));
    CHECK(big.read().result() == http::status::payload_too_large);
  }
  auto res = c.request(http::verb::get, "/metrics", {}, key);
  REQUIRE(res.result() == http::status::ok);
  CHECK(res[http::field::content_type].find("text/plain; version=0.0.4") == 0);
  CHECK(res.body().find("# TYPE ember_http_requests_total counter\n") != std::string::npos);
  auto m = parse_metrics(res.body());
  CHECK(requests_counted(m, "/health", 200) == 2);
  CHECK(requests_counted(m, "/v1/models", 401) == 1);
  CHECK(requests_counted(m, "other", 404) == 1);
  CHECK(requests_counted(m, "/v1/models/{id}", 404) == 1);
  CHECK(requests_counted(m, "/v1/completions", 400) == 1);
  CHECK(requests_counted(m, "/v1/completions", 200) == 2);
  CHECK(requests_counted(m, "/v1/completions", 413) == 1);
  CHECK(m["ember_http_active_requests"] == 1);  // this one
  CHECK(m["ember_model_loaded"] == 1);
  for (const char* name : {"ember_prompt_tokens_total", "ember_generated_tokens_total",
                           "ember_prefill_tokens_per_second", "ember_decode_tokens_per_second", "ember_queue_depth",
                           "ember_active_requests", "ember_jobs_cancelled_total", "ember_kv_cache_bytes",
                           "ember_model_bytes", "ember_slots", "ember_reused_prompt_tokens_total"}) {
    CAPTURE(name);
    CHECK(m.count(name) == 1);
  }
  // The next scrape sees the first one.
  m = parse_metrics(c.request(http::verb::get, "/metrics", {}, key).body());
  CHECK(requests_counted(m, "/metrics", 200) == 1);

  TestServer full(/*max_queued=*/0);
  Client fc(full.port());
  CHECK(fc.request(http::verb::post, "/v1/completions", kPrompt + "}").result() == http::status::service_unavailable);
  m = parse_metrics(fc.request(http::verb::get, "/metrics").body());
  CHECK(requests_counted(m, "/v1/completions", 503) == 1);
}

TEST_CASE("serve: /tokenize and /detokenize") {
  TestServer s;
  Client c(s.port());
  const Tokenizer& tok = s.engine->model().tokenizer();
  auto res = c.request(http::verb::post, "/tokenize", R"({"content":"the quick brown fox"})");
  REQUIRE(res.result() == http::status::ok);
  const std::vector<int32_t> expected = tok.encode("the quick brown fox", false, false);
  CHECK(body_json(res)["tokens"].get<std::vector<int32_t>>() == expected);

  res = c.request(http::verb::post, "/tokenize", R"({"content":"the quick brown fox","add_special":true})");
  CHECK(body_json(res)["tokens"].get<std::vector<int32_t>>() == tok.encode("the quick brown fox", true, false));

  res = c.request(http::verb::post, "/tokenize", R"({"content":"hello","with_pieces":true})");
  REQUIRE(res.result() == http::status::ok);
  std::string joined;
  const json pieces = body_json(res)["tokens"];
  for (const auto& t : pieces) {
    CHECK(t["id"].is_number_integer());
    joined += t["piece"].get<std::string>();
  }
  CHECK(joined.find("hello") != std::string::npos);

  json ids = json{{"tokens", expected}};
  res = c.request(http::verb::post, "/detokenize", ids.dump());
  REQUIRE(res.result() == http::status::ok);
  CHECK(body_json(res)["content"] == tok.decode(expected));

  res = c.request(http::verb::post, "/detokenize",
                  json{{"tokens", {1, tok.n_vocab()}}}.dump());
  CHECK(res.result() == http::status::bad_request);
  check_error_shape(res);
  CHECK(body_json(res)["error"]["message"].get<std::string>().find("tokens[1]") != std::string::npos);
  for (const char* bad : {R"({"content":7})", R"({})", "nope", R"({"content":"x","add_special":"no"})"}) {
    CAPTURE(bad);
    res = c.request(http::verb::post, "/tokenize", bad);
    CHECK(res.result() == http::status::bad_request);
    check_error_shape(res);
  }
  CHECK(c.request(http::verb::get, "/tokenize").result() == http::status::method_not_allowed);
}

TEST_CASE("serve: the demo model says so in /v1/models") {
  {
    TestServer s;
    Client c(s.port());
    CHECK(!body_json(c.request(http::verb::get, "/v1/models"))["data"][0].contains("ember_demo"));
  }
  TestServer s([](server::ServerOptions& o) { o.demo_model = true; });
  Client c(s.port());
  json m = body_json(c.request(http::verb::get, "/v1/models"))["data"][0];
  CHECK(m["ember_demo"] == true);
  CHECK(m["owned_by"] == "ember");
  CHECK(m["description"].get<std::string>().find("demo") != std::string::npos);
  m = body_json(c.request(http::verb::get, "/v1/models/tiny"));
  CHECK(m["ember_demo"] == true);
}

TEST_CASE("serve: include_usage sends a usage chunk before [DONE]") {
  TestServer s;
  Client c(s.port());
  for (const bool chat : {false, true}) {
    CAPTURE(chat);
    const std::string body =
        chat ? R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"temperature":0,"stream":true,"stream_options":{"include_usage":true}})"
             : R"({"prompt":"hi","max_tokens":5,"temperature":0,"stream":true,"stream_options":{"include_usage":true}})";
    auto res = c.request(http::verb::post, chat ? "/v1/chat/completions" : "/v1/completions", body);
    REQUIRE(res.result() == http::status::ok);
    auto payloads = sse_payloads(res.body());
    REQUIRE(payloads.size() >= 4);
    CHECK(payloads.back() == "[DONE]");
    json usage = json::parse(payloads[payloads.size() - 2]);
    CHECK(usage["choices"] == json::array());
    CHECK(usage["object"] == (chat ? "chat.completion.chunk" : "text_completion"));
    CHECK(usage["usage"]["completion_tokens"] == 5);
    CHECK(usage["usage"]["prompt_tokens"].get<int>() > 0);
    CHECK(usage["usage"]["total_tokens"] ==
          usage["usage"]["prompt_tokens"].get<int>() + usage["usage"]["completion_tokens"].get<int>());
    for (size_t i = 0; i + 2 < payloads.size(); ++i) {
      json chunk = json::parse(payloads[i]);
      CHECK(chunk.contains("usage"));
      CHECK(chunk["usage"].is_null());
      CHECK(chunk["choices"].size() == 1);
    }
    CHECK(json::parse(payloads[payloads.size() - 3])["choices"][0]["finish_reason"] == "length");
  }
  // Without it no chunk has a "usage" field.
  auto res = c.request(http::verb::post, "/v1/completions", kPrompt + R"(,"stream":true})");
  for (const auto& p : sse_payloads(res.body())) {
    if (p != "[DONE]") CHECK(!json::parse(p).contains("usage"));
  }
}

TEST_CASE("serve: keep-alive comments while a stream waits, the header at once") {
  TestServer s([](server::ServerOptions& o) { o.keepalive_interval = std::chrono::seconds(1); });
  occupy_engine(*s.engine, std::chrono::milliseconds(2300));
  Client c(s.port());
  const auto t0 = std::chrono::steady_clock::now();
  c.send(http::verb::post, "/v1/completions", kPrompt + R"(,"stream":true})");
  StreamReader r(c);
  CHECK(r.parser.get().result() == http::status::ok);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(900));  // not held back
  REQUIRE(r.read_until(c, [](const std::string& b) { return b.find(": keep-alive\n\n") != std::string::npos; }));
  CHECK(r.parser.get().body().rfind(": keep-alive\n\n", 0) == 0);  // before any data
  REQUIRE(r.read_until(c, [](const std::string& b) { return b.find("[DONE]") != std::string::npos; }));
  const auto payloads = sse_payloads(r.parser.get().body());
  CHECK(payloads.back() == "[DONE]");
  CHECK(json::parse(payloads[payloads.size() - 2])["choices"][0]["finish_reason"] == "length");
}

TEST_CASE("serve: a reader too far behind is cut off and the engine moves on") {
  TestServer s([](server::ServerOptions& o) { o.max_stream_backlog_bytes = 1; });
  {
    Client c(s.port());
    c.send(http::verb::post, "/v1/completions", kPrompt + R"(,"stream":true})");  // greedy: text, no early EOS
    StreamReader r(c);
    CHECK(r.parser.get().result() == http::status::ok);
    r.read_until(c, [](const std::string&) { return false; });  // until the server closes
    CHECK(r.parser.get().body().find("[DONE]") == std::string::npos);
  }
  Client c(s.port());
  auto res = c.request(http::verb::post, "/v1/completions", kPrompt + "}");
  CHECK(res.result() == http::status::ok);
  CHECK(body_json(res)["usage"]["completion_tokens"] == 8);
}

TEST_CASE("serve: stop() past the grace ends streams with server_shutdown and answers waiting requests") {
  TestServer s;
  occupy_engine(*s.engine, std::chrono::milliseconds(1500));
  Client streaming(s.port());
  streaming.send(http::verb::post, "/v1/completions", kPrompt + R"(,"stream":true})");
  StreamReader r(streaming);
  REQUIRE(r.parser.get().result() == http::status::ok);
  Client waiting(s.port());
  waiting.send(http::verb::post, "/v1/completions", kPrompt + "}");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // both requests are in
  const auto t0 = std::chrono::steady_clock::now();
  s.http_server->stop(std::chrono::milliseconds(200));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  r.read_until(streaming, [](const std::string& b) { return b.find("[DONE]") != std::string::npos; });
  const auto payloads = sse_payloads(r.parser.get().body());
  REQUIRE(payloads.size() >= 2);
  CHECK(payloads.back() == "[DONE]");
  json last = json::parse(payloads[payloads.size() - 2]);
  const bool ended_by_shutdown = last.contains("error");
  if (ended_by_shutdown) {
    CHECK(last["error"]["code"] == "server_shutdown");
  } else {
    CHECK(last["choices"][0]["finish_reason"] == "length");
  }
  CHECK(ended_by_shutdown);  // the engine was held past the grace
  auto res = waiting.read();
  CHECK(res.result() == http::status::service_unavailable);
  CHECK(body_json(res)["error"]["code"] == "server_shutdown");
}
