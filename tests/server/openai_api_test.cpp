// Request validation and response shapes, without sockets.
#include <doctest/doctest.h>

#include "server/openai_api.h"

using namespace ember;
using namespace ember::server;

TEST_CASE("openai_api: a completion request with every field") {
  auto r = parse_completion_request(
      R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0.5,"top_p":0.9,"top_k":7,"min_p":0.1,)"
      R"("seed":123,"stream":true,"presence_penalty":0.5,"frequency_penalty":-0.5,"user":"ignored"})");
  CHECK(r.prompt == "hi");
  CHECK(r.max_tokens == 5);
  CHECK(r.sampling.temperature == doctest::Approx(0.5));
  CHECK(r.sampling.top_p == doctest::Approx(0.9));
  CHECK(r.sampling.top_k == 7);
  CHECK(r.sampling.min_p == doctest::Approx(0.1));
  CHECK(r.sampling.seed == 123);
  CHECK(r.seed_given);
  CHECK(r.stream);
  CHECK(r.sampling.presence_penalty == doctest::Approx(0.5));
  CHECK(r.sampling.frequency_penalty == doctest::Approx(-0.5));
}

TEST_CASE("openai_api: defaults and explicit nulls") {
  auto r = parse_completion_request(R"({"prompt":["hi"],"max_tokens":null,"temperature":null})");
  CHECK(r.prompt == "hi");
  CHECK(r.max_tokens == 16);
  CHECK(!r.stream);
  CHECK(!r.seed_given);
}

TEST_CASE("openai_api: bad requests name the field") {
  auto param_of = [](const std::string& body) {
    try {
      parse_completion_request(body);
    } catch (const BadRequest& e) {
      return e.param();
    }
    return std::string("<accepted>");
  };
  CHECK(param_of(R"({"prompt":"x","max_tokens":-1})") == "max_tokens");
  CHECK(param_of(R"({"prompt":"x","max_tokens":18446744073709551615})") == "max_tokens");
  CHECK(param_of(R"({"prompt":"x","temperature":3})") == "temperature");
  CHECK(param_of(R"({"prompt":"x","top_k":1e3})") == "top_k");
  CHECK(param_of(R"({"prompt":["a","b"]})") == "prompt");
  CHECK(param_of(R"({"prompt":"x","model":5})") == "model");
  CHECK(param_of(R"({"prompt":"x","stop":"\n"})") == "stop");
  CHECK(param_of("{}") == "prompt");
  CHECK(param_of("nope") == "");
  RequestLimits small;
  small.max_prompt_bytes = 3;
  CHECK_THROWS_AS(parse_completion_request(R"({"prompt":"four"})", small), BadRequest);
}

TEST_CASE("openai_api: response shapes") {
  auto r = completion_response("cmpl-1", 100, "m", "text", FinishReason::EndOfGeneration, 3, 2);
  CHECK(r["choices"][0]["finish_reason"] == "stop");
  CHECK(r["usage"]["total_tokens"] == 5);
  auto c = completion_chunk("cmpl-1", 100, "m", "t", std::nullopt);
  CHECK(c["choices"][0]["finish_reason"].is_null());
  CHECK(sse_event(nlohmann::json{{"a", 1}}) == "data: {\"a\":1}\n\n");
  CHECK(sse_event(nlohmann::json{{"a", std::string("\xff")}}) == "data: {\"a\":\"\xef\xbf\xbd\"}\n\n");
  auto e = error_body("bad", "invalid_request_error");
  CHECK(e["error"]["param"].is_null());
  CHECK(e["error"]["code"].is_null());
}

TEST_CASE("openai_api: chat requests and shapes") {
  auto r = parse_chat_request(
      R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":null},{"role":"user","content":[{"type":"text","text":"b"},{"type":"text","text":"c"}]}],"max_completion_tokens":3})");
  REQUIRE(r.messages.size() == 3);
  CHECK(r.messages[1].content.empty());
  CHECK(r.messages[2].content == "bc");
  CHECK(r.max_tokens == 3);
  CHECK(r.max_tokens_given);
  CHECK(!parse_chat_request(R"({"messages":[{"role":"user","content":"a"}]})").max_tokens_given);
  CHECK_THROWS_AS(parse_chat_request(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})"), BadRequest);
  auto first = chat_chunk("c", 1, "m", true, "", std::nullopt);
  CHECK(first["choices"][0]["delta"] == nlohmann::json{{"role", "assistant"}, {"content", ""}});
  auto last = chat_chunk("c", 1, "m", false, std::nullopt, FinishReason::Length);
  CHECK(last["choices"][0]["delta"] == nlohmann::json::object());
  CHECK(last["choices"][0]["finish_reason"] == "length");
  auto full = chat_response("c", 1, "m", "hi", FinishReason::EndOfGeneration, 2, 1);
  CHECK(full["choices"][0]["message"]["content"] == "hi");
  CHECK(full["choices"][0]["finish_reason"] == "stop");
}
