// The SSE write state machine and the events of a completion, without sockets.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/completion_events.h"
#include "server/sse_stream.h"

using namespace ember::server;
using State = SseStream::State;
using nlohmann::json;

TEST_CASE("sse stream: header, events as chunks, then the end of the body in one last write") {
  SseStream s;
  CHECK(s.state() == State::Idle);
  s.begin(/*chunked=*/true);
  CHECK(s.state() == State::HeadersPending);
  CHECK(s.write_in_flight());
  s.push("data: a\n\n");
  CHECK(s.next_write() == nullptr);  // the header is still being written
  CHECK(!s.quiet());
  s.write_done();
  CHECK(s.state() == State::Streaming);
  const std::string* w = s.next_write();
  REQUIRE(w);
  CHECK(*w == "9\r\ndata: a\n\n\r\n");
  CHECK(s.backlog() == w->size());
  s.push("data: b\n\n");  // waits for the write in flight
  CHECK(s.next_write() == nullptr);
  s.write_done();
  w = s.next_write();
  REQUIRE(w);
  CHECK(*w == "9\r\ndata: b\n\n\r\n");
  s.write_done();
  CHECK(s.quiet());
  CHECK(s.next_write() == nullptr);

  s.finish("data: [DONE]\n\n");
  CHECK(s.state() == State::Finishing);
  CHECK(!s.accepting());
  s.push("data: late\n\n");  // ignored: the stream is ending
  w = s.next_write();
  REQUIRE(w);
  CHECK(*w == "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n");
  CHECK(s.state() == State::Finishing);
  s.write_done();
  CHECK(s.state() == State::Done);
  s.reset();
  CHECK(s.state() == State::Idle);
}

TEST_CASE("sse stream: an engine that finishes before the header is out") {
  SseStream s;
  s.begin(true);
  s.push("data: a\n\n");
  s.finish("data: [DONE]\n\n");
  CHECK(s.state() == State::Finishing);
  s.write_done();  // the header
  CHECK(s.state() == State::Finishing);
  const std::string* w = s.next_write();
  REQUIRE(w);
  CHECK(*w == "17\r\ndata: a\n\ndata: [DONE]\n\n\r\n0\r\n\r\n");
  s.write_done();
  CHECK(s.state() == State::Done);
}

TEST_CASE("sse stream: HTTP/1.0 writes raw events and ends without a write of its own") {
  SseStream s;
  s.begin(/*chunked=*/false);
  s.write_done();
  s.push("data: a\n\n");
  const std::string* w = s.next_write();
  REQUIRE(w);
  CHECK(*w == "data: a\n\n");
  s.finish("data: [DONE]\n\n");
  s.write_done();
  w = s.next_write();
  REQUIRE(w);
  CHECK(*w == "data: [DONE]\n\n");
  s.write_done();
  CHECK(s.state() == State::Done);

  // Nothing left when finishing: done at once, closing the connection ends the body.
  s.begin(false);
  s.write_done();
  s.finish("");
  CHECK(s.next_write() == nullptr);
  CHECK(s.state() == State::Done);
}

TEST_CASE("sse stream: once aborted nothing more is queued or written") {
  SseStream s;
  s.begin(true);
  s.write_done();
  s.push("data: a\n\n");
  REQUIRE(s.next_write());
  s.abort();
  s.write_done();  // the write in flight fails or completes: still aborted
  CHECK(s.state() == State::Aborted);
  s.push("data: b\n\n");
  s.finish("data: [DONE]\n\n");
  CHECK(s.next_write() == nullptr);
  CHECK(s.state() == State::Aborted);
  CHECK(!s.accepting());
}

TEST_CASE("completion events: chat role first, usage null on every chunk, a usage chunk before [DONE]") {
  CompletionShape shape;
  shape.chat = true;
  shape.stream = true;
  shape.include_usage = true;
  shape.id = "chatcmpl-1";
  shape.model = "tiny";
  shape.prompt_tokens = 3;
  CompletionEvents events(shape);
  const std::string first = events.text("Hi");
  CHECK(first.find("\"role\":\"assistant\"") != std::string::npos);
  CHECK(first.find("\"usage\":null") != std::string::npos);
  CHECK(events.text("!").find("\"role\"") == std::string::npos);  // the role goes out once
  ember::GenerationStats stats;
  stats.generated_tokens = 2;
  const std::string last = events.done(stats, nullptr);
  CHECK(last.find("\"total_tokens\":5") != std::string::npos);
  CHECK(last.size() >= 14);
  CHECK(last.substr(last.size() - 14) == "data: [DONE]\n\n");

  const std::string failed = events.done(stats, std::make_exception_ptr(std::runtime_error("boom")));
  CHECK(failed.find("\"message\":\"boom\"") != std::string::npos);
  CHECK(shutdown_events().find("server_shutdown") != std::string::npos);
}

TEST_CASE("completion events: a non-streaming answer is 200 with the text, or 500 with the engine's error") {
  CompletionShape shape;
  shape.id = "cmpl-1";
  shape.model = "tiny";
  CompletionEvents events(shape);
  ember::GenerationStats stats;
  Response ok = events.whole_response({ChoiceResult{"hello", {}, stats, {}}}, nullptr);
  CHECK(ok.result() == boost::beast::http::status::ok);
  CHECK(json::parse(ok.body())["choices"][0]["text"] == "hello");
  Response bad = events.whole_response({}, std::make_exception_ptr(std::runtime_error("boom")));
  CHECK(bad.result() == boost::beast::http::status::internal_server_error);
}

TEST_CASE("completion events: n choices, numbered in order; usage counts them all and the cached prefix once") {
  CompletionShape shape;
  shape.chat = true;
  shape.id = "chatcmpl-3";
  shape.model = "tiny";
  shape.prompt_tokens = 10;
  shape.choices_per_prompt = 2;
  ember::GenerationStats first, second;
  first.generated_tokens = 4;
  first.cached_prompt_tokens = 6;
  first.finish = ember::FinishReason::EndOfGeneration;
  second.generated_tokens = 5;
  second.cached_prompt_tokens = 9;  // the second choice reuses the first's prompt: not a client's saving
  CompletionEvents whole(shape);
  const json body = json::parse(whole.whole_response({ChoiceResult{"a", {}, first, {}}, ChoiceResult{"b", {}, second, {}}}, nullptr).body());
  REQUIRE(body["choices"].size() == 2);
  CHECK(body["choices"][1]["index"] == 1);
  CHECK(body["choices"][1]["message"]["content"] == "b");
  CHECK(body["choices"][0]["finish_reason"] == "stop");
  CHECK(body["choices"][1]["finish_reason"] == "length");
  CHECK(body["usage"]["completion_tokens"] == 9);
  CHECK(body["usage"]["prompt_tokens_details"]["cached_tokens"] == 6);

  shape.stream = true;
  shape.include_usage = true;
  CompletionEvents stream(shape);
  std::string out = stream.text("a");
  out += stream.choice_end(first);
  out += stream.text("b");
  out += stream.done(second, nullptr);
  std::vector<json> chunks;
  for (size_t at = out.find("data: {"); at != std::string::npos; at = out.find("data: {", at + 1)) {
    chunks.push_back(json::parse(out.substr(at + 6, out.find("\n\n", at) - at - 6)));
  }
  std::vector<int> order;
  for (const json& c : chunks) {
    if (!c["choices"].empty()) order.push_back(c["choices"][0]["index"].get<int>());
  }
  CHECK(order == std::vector<int>{0, 0, 0, 1, 1, 1});  // role, text, finish per choice
  CHECK(chunks.back()["usage"]["completion_tokens"] == 9);
  CHECK(chunks.back()["usage"]["prompt_tokens_details"]["cached_tokens"] == 6);
}

namespace {
std::vector<json> chunks_of(const std::string& out) {
  std::vector<json> chunks;
  for (size_t at = out.find("data: {"); at != std::string::npos; at = out.find("data: {", at + 1)) {
    chunks.push_back(json::parse(out.substr(at + 6, out.find("\n\n", at) - at - 6)));
  }
  return chunks;
}

ember::server::TokenLogprobs token(const std::string& text, float logprob) {
  return {{text, logprob}, {{text, logprob}}};
}
}  // namespace

TEST_CASE("completion events: several prompts with echo; prompt logprobs lead each choice's logprobs") {
  CompletionShape shape;
  shape.id = "cmpl-4";
  shape.model = "tiny";
  shape.prompt_tokens = 7;
  shape.choices_per_prompt = 2;
  shape.logprobs = true;
  shape.echo = {"Hi", "Yo"};
  ember::GenerationStats stats;
  stats.generated_tokens = 1;
  stats.cached_prompt_tokens = 1;
  const std::vector<ember::server::TokenLogprobs> hi = {token("H", std::nanf("")), token("i", -0.5f)};
  const std::vector<ember::server::TokenLogprobs> yo = {token("Yo", -2.0f)};

  CompletionEvents whole(shape);
  std::vector<ChoiceResult> results(4);
  for (size_t i = 0; i < results.size(); ++i) {
    results[i].text = "!" + std::to_string(i);
    results[i].stats = stats;
    results[i].logprobs = {token("!" + std::to_string(i), -1.0f)};
  }
  results[0].prompt_logprobs = hi;
  results[2].prompt_logprobs = yo;
  const json body = json::parse(whole.whole_response(std::move(results), nullptr).body());
  REQUIRE(body["choices"].size() == 4);
  CHECK(body["choices"][1]["text"] == "Hi!1");
  CHECK(body["choices"][3]["text"] == "Yo!3");
  const json& lp1 = body["choices"][1]["logprobs"];
  CHECK(lp1["tokens"] == json::array({"H", "i", "!1"}));
  CHECK(lp1["token_logprobs"][0].is_null());
  CHECK(lp1["top_logprobs"][0].is_null());
  CHECK(lp1["token_logprobs"][1] == -0.5);
  CHECK(lp1["text_offset"] == json::array({0, 1, 2}));
  CHECK(body["choices"][2]["logprobs"]["tokens"] == json::array({"Yo", "!2"}));
  CHECK(body["usage"]["prompt_tokens_details"]["cached_tokens"] == 2);  // each prompt's first choice

  shape.stream = true;
  CompletionEvents stream(shape);
  stream.prompt_logprobs(hi);
  stream.logprobs(token("!0", -1.0f));
  std::string out = stream.text("!0");
  out += stream.choice_end(stats);
  out += stream.choice_end(stats);  // max_tokens 0: no text, the echo still comes
  stream.prompt_logprobs(yo);
  out += stream.text("!2");
  out += stream.done(stats, nullptr);
  const std::vector<json> chunks = chunks_of(out);
  std::vector<std::string> texts;
  std::vector<int> order;
  for (const json& c : chunks) {
    texts.push_back(c["choices"][0]["text"].get<std::string>());
    order.push_back(c["choices"][0]["index"].get<int>());
  }
  CHECK(texts == std::vector<std::string>{"Hi", "!0", "", "Hi", "", "Yo", "!2", ""});
  CHECK(order == std::vector<int>{0, 0, 0, 1, 1, 2, 2, 2});
  CHECK(chunks[0]["choices"][0]["logprobs"]["tokens"] == json::array({"H", "i"}));
  CHECK(chunks[1]["choices"][0]["logprobs"]["text_offset"] == json::array({2}));
  CHECK(chunks[5]["choices"][0]["logprobs"]["tokens"] == json::array({"Yo"}));
}
