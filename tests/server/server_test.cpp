// The daemon end to end: a real server on 127.0.0.1 (ephemeral port) over a tiny synthetic model,
// driven by a small synchronous Beast client.
#include <doctest/doctest.h>

#include <boost/asio/connect.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/http_test_support.h"

namespace {
using namespace ember;
using namespace ember::test_http;

const std::string kPrompt = R"({"prompt":"the quick brown fox","max_tokens":8,"temperature":0)";

}  // namespace

TEST_CASE("server: health, models, 404 and 405, all on one keep-alive connection") {
  TestServer s;
  Client c(s.port());
  auto res = c.request(http::verb::get, "/health");
  CHECK(res.result() == http::status::ok);
  CHECK(body_json(res) == json{{"status", "ok"}});
  CHECK(res.keep_alive());

  res = c.request(http::verb::get, "/v1/models");
  CHECK(res.result() == http::status::ok);
  json list = body_json(res);
  CHECK(list["object"] == "list");
  REQUIRE(list["data"].size() == 1);
  CHECK(list["data"][0]["id"] == "tiny");
  CHECK(list["data"][0]["object"] == "model");
  CHECK(list["data"][0]["owned_by"].is_string());
  CHECK(list["data"][0]["created"].is_number_integer());

  res = c.request(http::verb::get, "/v1/models/tiny");
  CHECK(res.result() == http::status::ok);
  CHECK(body_json(res)["id"] == "tiny");

  res = c.request(http::verb::get, "/v1/models/other");
  CHECK(res.result() == http::status::not_found);
  check_error_shape(res);
  CHECK(body_json(res)["error"]["code"] == "model_not_found");

  res = c.request(http::verb::get, "/nowhere");
  CHECK(res.result() == http::status::not_found);
  check_error_shape(res);

  res = c.request(http::verb::get, "/v1/completions");
  CHECK(res.result() == http::status::method_not_allowed);
  CHECK(res[http::field::allow] == "POST");
  check_error_shape(res);

  res = c.request(http::verb::post, "/health", "{}");
  CHECK(res.result() == http::status::method_not_allowed);

  res = c.request(http::verb::get, "/health?verbose=1");
  CHECK(res.result() == http::status::ok);
}

TEST_CASE("server: completion, non-streaming and streaming agree at temperature 0") {
  TestServer s;
  Client c(s.port());
  auto res = c.request(http::verb::post, "/v1/completions", kPrompt + "}");
  REQUIRE(res.result() == http::status::ok);
  CHECK(res[http::field::content_type] == "application/json");
  json j = body_json(res);
  CHECK(j["object"] == "text_completion");
  CHECK(j["model"] == "tiny");
  CHECK(j["id"].get<std::string>().rfind("cmpl-", 0) == 0);
  CHECK(j["created"].is_number_integer());
  REQUIRE(j["choices"].size() == 1);
  const json& choice = j["choices"][0];
  CHECK(choice["index"] == 0);
  CHECK(choice["logprobs"].is_null());
  CHECK(choice["finish_reason"] == "length");
  const std::string text = choice["text"];
  CHECK(!text.empty());
  const auto prompt_tokens = s.engine->model().tokenizer().encode("the quick brown fox", true, false).size();
  CHECK(j["usage"]["prompt_tokens"] == prompt_tokens);
  CHECK(j["usage"]["completion_tokens"] == 8);
  CHECK(j["usage"]["total_tokens"] == prompt_tokens + 8);

  // The same request streamed, on the same connection.
  res = c.request(http::verb::post, "/v1/completions", kPrompt + R"(,"stream":true})");
  REQUIRE(res.result() == http::status::ok);
  CHECK(res[http::field::content_type] == "text/event-stream");
  auto payloads = sse_payloads(res.body());
  REQUIRE(payloads.size() >= 3);
  CHECK(payloads.back() == "[DONE]");
  std::string streamed;
  for (size_t i = 0; i + 1 < payloads.size(); ++i) {
    json chunk = json::parse(payloads[i]);
    CHECK(chunk["object"] == "text_completion");
    CHECK(chunk["model"] == "tiny");
    REQUIRE(chunk["choices"].size() == 1);
    streamed += chunk["choices"][0]["text"].get<std::string>();
    const bool last = i + 2 == payloads.size();
    if (last) {
      CHECK(chunk["choices"][0]["finish_reason"] == "length");
    } else {
      CHECK(chunk["choices"][0]["finish_reason"].is_null());
    }
  }
  CHECK(streamed == text);

  // Seeded sampling is reproducible.
  const std::string seeded = R"({"prompt":"hello","max_tokens":6,"temperature":0.9,"top_k":20,"top_p":0.9,"min_p":0.01,"seed":42})";
  auto a = body_json(c.request(http::verb::post, "/v1/completions", seeded));
  auto b = body_json(c.request(http::verb::post, "/v1/completions", seeded));
  CHECK(a["choices"][0]["text"] == b["choices"][0]["text"]);
}

TEST_CASE("server: invalid requests get 400 and the connection keeps serving") {
  TestServer s;
  Client c(s.port());
  const std::vector<std::string> bad = {
      "{not json",
      "[1,2]",
      R"({"max_tokens":4})",
      R"({"prompt":42})",
      R"({"prompt":"x","max_tokens":-1})",
      R"({"prompt":"x","max_tokens":0})",
      R"({"prompt":"x","max_tokens":"8"})",
      R"({"prompt":"x","max_tokens":1.5})",
      R"({"prompt":"x","max_tokens":100000})",  // over the 256-token context
      R"({"prompt":"x","temperature":-0.5})",
      R"({"prompt":"x","temperature":"hot"})",
      R"({"prompt":"x","top_p":1.5})",
      R"({"prompt":"x","top_k":-3})",
      R"({"prompt":"x","min_p":2})",
      R"({"prompt":"x","seed":"abc"})",
      R"({"prompt":"x","stream":"yes"})",
      R"({"prompt":"x","n":17})",
  };
  for (const auto& body : bad) {
    CAPTURE(body);
    auto res = c.request(http::verb::post, "/v1/completions", body);
    CHECK(res.result() == http::status::bad_request);
    check_error_shape(res);
  }
  auto res = c.request(http::verb::post, "/v1/completions", R"({"prompt":"x","max_tokens":-1})");
  CHECK(body_json(res)["error"]["param"] == "max_tokens");
  CHECK(c.request(http::verb::get, "/health").result() == http::status::ok);
}

TEST_CASE("server: a body over the limit gets 413 and the server keeps serving") {
  TestServer s;
  {
    Client c(s.port());
    // Headers only: the server must refuse from Content-Length alone.
    const std::string head =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: 100000\r\n\r\n";
    net::write(c.stream, net::buffer(head));
    auto res = c.read();
    CHECK(res.result() == http::status::payload_too_large);
    check_error_shape(res);
    CHECK(!res.keep_alive());
  }
  Client c2(s.port());
  CHECK(c2.request(http::verb::get, "/health").result() == http::status::ok);
}

TEST_CASE("server: a full queue answers 503 with Retry-After") {
  TestServer s(/*max_queued=*/0);
  Client c(s.port());
  auto res = c.request(http::verb::post, "/v1/completions", kPrompt + "}");
  CHECK(res.result() == http::status::service_unavailable);
  CHECK(!res[http::field::retry_after].empty());
  check_error_shape(res);
  CHECK(c.request(http::verb::get, "/health").result() == http::status::ok);
}

TEST_CASE("server: a client that leaves mid-stream does not break the next request") {
  TestServer s;
  {
    Client c(s.port());
    http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
    req.set(http::field::host, "127.0.0.1");
    req.body() = R"({"prompt":"once upon a time","max_tokens":200,"stream":true})";
    req.prepare_payload();
    http::write(c.stream, req);
    // Read only the header, then hang up.
    http::response_parser<http::empty_body> p;
    http::read_header(c.stream, c.buffer, p);
    CHECK(p.get().result() == http::status::ok);
  }
  Client c(s.port());
  auto res = c.request(http::verb::post, "/v1/completions", kPrompt + "}");
  CHECK(res.result() == http::status::ok);
  CHECK(body_json(res)["usage"]["completion_tokens"] == 8);
}

TEST_CASE("server: chat completion, non-streaming and streaming shapes") {
  TestServer s;
  Client c(s.port());
  const std::string req =
      R"({"model":"tiny","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hello"}]}],"max_tokens":6,"temperature":0)";
  auto res = c.request(http::verb::post, "/v1/chat/completions", req + "}");
  REQUIRE(res.result() == http::status::ok);
  json j = body_json(res);
  CHECK(j["object"] == "chat.completion");
  CHECK(j["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
  REQUIRE(j["choices"].size() == 1);
  CHECK(j["choices"][0]["message"]["role"] == "assistant");
  CHECK(j["choices"][0]["finish_reason"] == "length");
  CHECK(j["usage"]["completion_tokens"] == 6);
  CHECK(j["usage"]["prompt_tokens"].get<int>() > 3);
  const std::string text = j["choices"][0]["message"]["content"];

  res = c.request(http::verb::post, "/v1/chat/completions", req + R"(,"stream":true})");
  REQUIRE(res.result() == http::status::ok);
  auto payloads = sse_payloads(res.body());
  REQUIRE(payloads.size() >= 4);
  CHECK(payloads.back() == "[DONE]");
  json first = json::parse(payloads[0]);
  CHECK(first["object"] == "chat.completion.chunk");
  CHECK(first["choices"][0]["delta"]["role"] == "assistant");
  CHECK(first["choices"][0]["finish_reason"].is_null());
  json last = json::parse(payloads[payloads.size() - 2]);
  CHECK(last["choices"][0]["finish_reason"] == "length");
  CHECK(last["choices"][0]["delta"] == json::object());
  std::string streamed;
  for (size_t i = 1; i + 2 < payloads.size(); ++i) {
    json chunk = json::parse(payloads[i]);
    CHECK(!chunk["choices"][0]["delta"].contains("role"));
    CHECK(chunk["choices"][0]["finish_reason"].is_null());
    streamed += chunk["choices"][0]["delta"]["content"].get<std::string>();
  }
  CHECK(streamed == text);

  for (const std::string bad : {R"({"messages":[]})", R"({"messages":"hi"})", R"({"messages":[{"role":"robot","content":"x"}]})",
                                R"({"messages":[{"role":"user","content":5}]})", R"({"prompt":"x"})"}) {
    CAPTURE(bad);
    auto r = c.request(http::verb::post, "/v1/chat/completions", bad);
    CHECK(r.result() == http::status::bad_request);
    check_error_shape(r);
  }
}

TEST_CASE("server: stop() lets a running stream finish, then refuses connections") {
  TestServer s;
  const uint16_t port = s.port();
  Client c(port);
  http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
  req.set(http::field::host, "127.0.0.1");
  req.body() = R"({"prompt":"once upon a time","max_tokens":150,"temperature":0,"stream":true})";
  req.prepare_payload();
  http::write(c.stream, req);
  http::response_parser<http::string_body> p;
  p.body_limit(16 << 20);
  http::read_header(c.stream, c.buffer, p);
  REQUIRE(p.get().result() == http::status::ok);
  std::thread stopper([&] { s.http_server->stop(std::chrono::seconds(5)); });
  http::read(c.stream, c.buffer, p);
  stopper.join();
  auto payloads = sse_payloads(p.get().body());
  REQUIRE(!payloads.empty());
  CHECK(payloads.back() == "[DONE]");
  net::io_context ioc;
  tcp::socket sock(ioc);
  boost::system::error_code ec;
  sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  CHECK(ec);
}

TEST_CASE("server: malformed HTTP and oversized headers are answered, then the server keeps serving") {
  TestServer s;
  {
    Client c(s.port());
    net::write(c.stream, net::buffer(std::string("THIS IS NOT HTTP\r\n\r\n")));
    auto res = c.read();
    CHECK(res.result() == http::status::bad_request);
    check_error_shape(res);
  }
  {
    Client c(s.port());
    const std::string head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(32 * 1024, 'a') + "\r\n\r\n";
    net::write(c.stream, net::buffer(head));
    auto res = c.read();
    CHECK(res.result() == http::status::request_header_fields_too_large);
  }
  Client c(s.port());
  CHECK(c.request(http::verb::get, "/health").result() == http::status::ok);
}
