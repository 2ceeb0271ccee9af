// Request validation and response shapes, without sockets.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "server/openai_api.h"

using namespace ember;
using namespace ember::server;

TEST_CASE("openai_api: a completion request with every field") {
  auto r = parse_completion_request(
      R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0.5,"top_p":0.9,"top_k":7,"min_p":0.1,)"
      R"("seed":123,"stream":true,"presence_penalty":0.5,"frequency_penalty":-0.5,"user":"ignored"})");
  REQUIRE(r.prompts.size() == 1);
  CHECK(r.prompts[0].text == "hi");
  CHECK(r.model == "m");  // checked against the served model by the handler (404 model_not_found)
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
  REQUIRE(r.prompts.size() == 1);
  CHECK(r.prompts[0].text == "hi");
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
  CHECK(param_of(R"({"prompt":["a",2]})") == "prompt");
  CHECK(param_of(R"({"prompt":"x","model":5})") == "model");
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

namespace {
std::string rejected_param(const std::string& body, bool chat = false) {
  try {
    if (chat) {
      parse_chat_request(body);
    } else {
      parse_completion_request(body);
    }
  } catch (const BadRequest& e) {
    return e.param();
  }
  return "<accepted>";
}
std::string rejected_message(const std::string& body) {
  try {
    parse_completion_request(body);
  } catch (const BadRequest& e) {
    return e.what();
  }
  return "<accepted>";
}
}  // namespace

TEST_CASE("openai_api: prompt as a string, strings, token ids or arrays of token ids") {
  auto r = parse_completion_request(R"({"prompt":[1,2,3]})");
  REQUIRE(r.prompts.size() == 1);
  CHECK(r.prompts[0].is_tokens);
  CHECK(r.prompts[0].tokens == std::vector<int32_t>{1, 2, 3});
  CHECK(r.prompts[0].text.empty());
  r = parse_completion_request(R"({"prompt":[[4,5]]})");
  REQUIRE(r.prompts.size() == 1);
  CHECK(r.prompts[0].tokens == std::vector<int32_t>{4, 5});
  r = parse_completion_request(R"({"prompt":["text"]})");
  REQUIRE(r.prompts.size() == 1);
  CHECK(!r.prompts[0].is_tokens);
  CHECK(r.prompts[0].text == "text");
  r = parse_completion_request(R"({"prompt":["a","b",""],"n":2})");
  REQUIRE(r.prompts.size() == 3);
  CHECK(r.prompts[1].text == "b");
  CHECK(r.prompts[2].text.empty());
  r = parse_completion_request(R"({"prompt":[[1],[2,3]]})");
  REQUIRE(r.prompts.size() == 2);
  CHECK(r.prompts[1].tokens == std::vector<int32_t>{2, 3});
  // Mixed arrays, empty id arrays, too many choices.
  CHECK(rejected_message(R"({"prompt":["a",[1]]})").find("prompt[1]") != std::string::npos);
  CHECK(rejected_message(R"({"prompt":[[1],"a"]})").find("prompt[1]") != std::string::npos);
  CHECK(rejected_message(R"({"prompt":[[1],[]]})").find("prompt[1]") != std::string::npos);
  CHECK(rejected_param(R"({"prompt":["a","b","c","d","e"],"n":4})") == "n");
  CHECK(rejected_param(R"({"prompt":[[1],[1],[1],[1],[1],[1],[1],[1],[1],[1],[1],[1],[1],[1],[1],[1],[1]]})") ==
        "prompt");
  CHECK(rejected_param(R"({"prompt":[]})") == "prompt");
  CHECK(rejected_param(R"({"prompt":[[]]})") == "prompt");
  CHECK(rejected_param(R"({"prompt":[1,-2]})") == "prompt");
  CHECK(rejected_message(R"({"prompt":[1,-2]})").find("prompt[1]") != std::string::npos);
  CHECK(rejected_param(R"({"prompt":[1,2.5]})") == "prompt");
  CHECK(rejected_param(R"({"prompt":[1,"a"]})") == "prompt");
  CHECK(rejected_param(R"({"prompt":[4294967296]})") == "prompt");
  CHECK(rejected_param(R"({"prompt":[true]})") == "prompt");
  CHECK(rejected_param(R"({"prompt":{"text":"x"}})") == "prompt");
  // The size limits hold for all prompts together.
  RequestLimits small;
  small.max_prompt_tokens = 2;
  CHECK_THROWS_AS(parse_completion_request(R"({"prompt":[1,2,3]})", small), BadRequest);
  CHECK_THROWS_AS(parse_completion_request(R"({"prompt":[[1,2],[3]]})", small), BadRequest);
  small.max_prompt_bytes = 3;
  CHECK_THROWS_AS(parse_completion_request(R"({"prompt":["ab","cd"]})", small), BadRequest);
}

TEST_CASE("openai_api: echo (completions only), and max_tokens 0 with it") {
  auto r = parse_completion_request(R"({"prompt":"x","echo":true,"max_tokens":0,"logprobs":2})");
  CHECK(r.echo);
  CHECK(r.max_tokens == 0);
  CHECK(r.top_logprobs == 2);
  CHECK(!parse_completion_request(R"({"prompt":"x","echo":false})").echo);
  CHECK(rejected_param(R"({"prompt":"x","echo":"yes"})") == "echo");
  CHECK(rejected_param(R"({"prompt":"x","max_tokens":0})") == "max_tokens");
  CHECK_THROWS_AS(parse_chat_request(R"({"messages":[{"role":"user","content":"a"}],"echo":true})"), BadRequest);
  CHECK_THROWS_AS(parse_chat_request(R"({"messages":[{"role":"user","content":"a"}],"max_tokens":0})"), BadRequest);
  CHECK_NOTHROW(parse_chat_request(R"({"messages":[{"role":"user","content":"a"}],"echo":false})"));
}

TEST_CASE("openai_api: max_tokens and max_completion_tokens on both endpoints") {
  CHECK(parse_completion_request(R"({"prompt":"x","max_completion_tokens":7})").max_tokens == 7);
  CHECK(parse_completion_request(R"({"prompt":"x","max_completion_tokens":7,"max_tokens":3})").max_tokens == 3);
  const std::string msgs = R"("messages":[{"role":"user","content":"a"}])";
  CHECK(parse_chat_request("{" + msgs + R"(,"max_tokens":2,"max_completion_tokens":9})").max_tokens == 2);
  CHECK(parse_chat_request("{" + msgs + R"(,"max_completion_tokens":9})").max_tokens == 9);
  CHECK(rejected_param(R"({"prompt":"x","max_completion_tokens":-1})") == "max_completion_tokens");
  CHECK(rejected_param(R"({"prompt":"x","max_completion_tokens":"5","max_tokens":3})") == "max_completion_tokens");
}

TEST_CASE("openai_api: stop strings") {
  CHECK(parse_completion_request(R"({"prompt":"x","stop":"\n"})").stop == std::vector<std::string>{"\n"});
  CHECK(parse_completion_request(R"({"prompt":"x","stop":["a","b","c","d"]})").stop.size() == 4);
  CHECK(parse_completion_request(R"({"prompt":"x","stop":[]})").stop.empty());
  CHECK(parse_completion_request(R"({"prompt":"x","stop":null})").stop.empty());
  CHECK(rejected_param(R"({"prompt":"x","stop":["a","b","c","d","e"]})") == "stop");
  CHECK(rejected_param(R"({"prompt":"x","stop":""})") == "stop");
  CHECK(rejected_param(R"({"prompt":"x","stop":["a",""]})") == "stop");
  CHECK(rejected_param(R"({"prompt":"x","stop":["a",3]})") == "stop");
  CHECK(rejected_param(R"({"prompt":"x","stop":5})") == "stop");
  CHECK(rejected_param(R"({"prompt":"x","stop":")" + std::string(257, 'a') + "\"}") == "stop");
  CHECK(rejected_param(R"({"messages":[{"role":"user","content":"a"}],"stop":{}})", true) == "stop");
}

TEST_CASE("openai_api: penalties, logit_bias and local sampling extensions") {
  auto r = parse_completion_request(
      R"({"prompt":"x","presence_penalty":-2,"frequency_penalty":2,"repeat_penalty":1.1,"logit_bias":{"0":-100,"42":3.5}})");
  CHECK(r.sampling.presence_penalty == doctest::Approx(-2));
  CHECK(r.sampling.frequency_penalty == doctest::Approx(2));
  CHECK(r.sampling.repeat_penalty == doctest::Approx(1.1));
  REQUIRE(r.sampling.logit_bias.size() == 2);
  for (const auto& [id, bias] : r.sampling.logit_bias) {
    if (id == 0) CHECK((std::isinf(bias) && bias < 0));
    if (id == 42) CHECK(bias == doctest::Approx(3.5));
  }
  CHECK(rejected_param(R"({"prompt":"x","presence_penalty":2.5})") == "presence_penalty");
  CHECK(rejected_param(R"({"prompt":"x","frequency_penalty":"1"})") == "frequency_penalty");
  CHECK(rejected_param(R"({"prompt":"x","repeat_penalty":0})") == "repeat_penalty");
  CHECK(rejected_param(R"({"prompt":"x","repeat_penalty":10.5})") == "repeat_penalty");
  CHECK(parse_completion_request(R"({"prompt":"x","repeat_penalty":10})").sampling.repeat_penalty == 10.0f);
  CHECK(rejected_param(R"({"prompt":"x","logit_bias":[1]})") == "logit_bias");
  CHECK(rejected_param(R"({"prompt":"x","logit_bias":{"a":1}})") == "logit_bias");
  CHECK(rejected_param(R"({"prompt":"x","logit_bias":{"-1":1}})") == "logit_bias");
  CHECK(rejected_param(R"({"prompt":"x","logit_bias":{"+1":1}})") == "logit_bias");
  CHECK(rejected_param(R"({"prompt":"x","logit_bias":{"99999999999":1}})") == "logit_bias");
  CHECK(rejected_param(R"({"prompt":"x","logit_bias":{"1":101}})") == "logit_bias");
  CHECK(rejected_param(R"({"prompt":"x","logit_bias":{"1":"5"}})") == "logit_bias");
  RequestLimits small;
  small.max_logit_bias = 1;
  CHECK_THROWS_AS(parse_completion_request(R"({"prompt":"x","logit_bias":{"1":1,"2":2}})", small), BadRequest);
  CHECK(parse_completion_request(R"({"prompt":"x","logit_bias":{}})").sampling.logit_bias.empty());
  CHECK(rejected_param(R"({"prompt":"x","top_p":-0.1})") == "top_p");
  CHECK(rejected_param(R"({"prompt":"x","min_p":1.1})") == "min_p");
  CHECK(rejected_param(R"({"prompt":"x","seed":1.5})") == "seed");
  CHECK(parse_completion_request(R"({"prompt":"x","seed":-1})").seed_given);
}

TEST_CASE("openai_api: stream_options, n and user") {
  auto r = parse_completion_request(R"({"prompt":"x","stream":true,"stream_options":{"include_usage":true}})");
  CHECK(r.include_usage);
  CHECK(!parse_completion_request(R"({"prompt":"x","stream":true,"stream_options":{}})").include_usage);
  CHECK(!parse_completion_request(R"({"prompt":"x","stream_options":null})").include_usage);
  CHECK(rejected_param(R"({"prompt":"x","stream_options":{"include_usage":true}})") == "stream_options");
  CHECK(rejected_param(R"({"prompt":"x","stream":false,"stream_options":{"include_usage":true}})") == "stream_options");
  CHECK(rejected_param(R"({"prompt":"x","stream":true,"stream_options":true})") == "stream_options");
  CHECK(rejected_param(R"({"prompt":"x","stream":true,"stream_options":{"include_usage":1}})") ==
        "stream_options.include_usage");
  CHECK(rejected_param(R"({"messages":[{"role":"user","content":"a"}],"stream_options":{}})", true) ==
        "stream_options");
  CHECK(parse_completion_request(R"({"prompt":"x","n":1,"user":{"any":"thing"},"unknown":[1]})").prompts.size() == 1);
  CHECK(parse_completion_request(R"({"prompt":"x","n":3})").n == 3);
  CHECK(rejected_param(R"({"prompt":"x","n":0})") == "n");
  CHECK(rejected_param(R"({"prompt":"x","n":"1"})") == "n");
  CHECK(rejected_message(R"({"prompt":"x","n":17})").find("16") != std::string::npos);
}

TEST_CASE("openai_api: stop sequences finish with \"stop\"") {
  CHECK(std::string(openai_finish_reason(FinishReason::StopSequence)) == "stop");
  CHECK(std::string(openai_finish_reason(FinishReason::EndOfGeneration)) == "stop");
  CHECK(std::string(openai_finish_reason(FinishReason::Length)) == "length");
  auto r = completion_response("c", 1, "m", "t", FinishReason::StopSequence, 1, 1);
  CHECK(r["choices"][0]["finish_reason"] == "stop");
}

TEST_CASE("openai_api: fields not implemented yet are refused unless they ask for the default") {
  struct Refused {
    const char* field;
    const char* name;
    bool on_chat;  // false: a chat field, refused on completions only
  };
  const Refused refused[] = {
      {R"("response_format":"json")", "response_format", true},
      {R"("tools":[{"type":"function","function":{"name":"f"}}])", "tools", false},
      {R"("tool_choice":"auto")", "tool_choice", false},
      {R"("tool_choice":{"type":"function","function":{"name":"f"}})", "tool_choice", true},  // no such tool
      {R"("functions":[{"name":"f"}])", "functions", true},
      {R"("suffix":"x")", "suffix", true},
      {R"("best_of":2)", "best_of", true},
  };
  for (const auto& [field, name, on_chat] : refused) {
    for (const bool chat : {false, true}) {
      if (chat && !on_chat) continue;
      const std::string body = chat ? std::string(R"({"messages":[{"role":"user","content":"hi"}],)") + field + "}"
                                    : std::string(R"({"prompt":"hi",)") + field + "}";
      CAPTURE(body);
      try {
        chat ? parse_chat_request(body) : parse_completion_request(body);
        FAIL("accepted");
      } catch (const BadRequest& e) {
        CHECK(e.param() == name);
        CHECK(std::string(e.what()).find(name) != std::string::npos);
      }
    }
  }
  // The defaults (and explicit nulls) are fine.
  const char* accepted[] = {
      R"("response_format":{"type":"text"})", R"("response_format":null)", R"("tools":[])",
      R"("tool_choice":"none")", R"("logprobs":false)", R"("top_logprobs":0)", R"("echo":false)",
      R"("suffix":"")", R"("best_of":1)", R"("logprobs":null)"};
  for (const char* field : accepted) {
    CAPTURE(field);
    CHECK_NOTHROW(parse_completion_request(std::string(R"({"prompt":"hi",)") + field + "}"));
  }
}

TEST_CASE("openai_api: a content part whose type is not a string is a 400, not a crash") {
  for (const char* content : {R"([{"type":5,"text":"hi"}])", R"([{"type":null,"text":"hi"}])",
                              R"([{"type":["text"],"text":"hi"}])", R"([{"text":"hi"}])", R"([7])"}) {
    const std::string body = std::string(R"({"messages":[{"role":"user","content":)") + content + "}]}";
    CAPTURE(body);
    CHECK_THROWS_AS(parse_chat_request(body), BadRequest);
  }
}
