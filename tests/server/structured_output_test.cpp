// response_format / grammar / json_schema and logprobs fields of a request, and the logprobs
// shapes of a response, without sockets.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/grammar/json_schema.h"
#include "server/completion_events.h"
#include "server/logprobs_json.h"
#include "server/openai_api.h"

using namespace ember;
using namespace ember::server;

namespace {

std::string chat_body(const std::string& fields) {
  return R"({"messages":[{"role":"user","content":"hi"}],)" + fields + "}";
}

BadRequest refusal(const std::string& body) {
  try {
    parse_chat_request(body);
  } catch (const BadRequest& e) {
    return e;
  }
  FAIL("accepted: " << body);
  return BadRequest("");
}

}  // namespace

TEST_CASE("structured output: response_format types become grammars") {
  CHECK(parse_chat_request(chat_body(R"("response_format":{"type":"text"})")).grammar.gbnf.empty());
  const auto obj = parse_chat_request(chat_body(R"("response_format":{"type":"json_object"})"));
  CHECK(!obj.grammar.gbnf.empty());
  CHECK(obj.grammar.param == "response_format");
  const auto schema = parse_completion_request(
      R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,)"
      R"("schema":{"type":"object","properties":{"b":{"type":"boolean"},"a":{"type":"integer"}}}}}})");
  CHECK(schema.grammar.param == "response_format.json_schema.schema");
  // Properties in written order ("b" before "a"), though the parsed request sorts keys.
  CHECK(schema.grammar.gbnf == grammar::json_schema_to_gbnf(std::string_view(
                                   R"({"type":"object","properties":{"b":{"type":"boolean"},"a":{"type":"integer"}}})")));
  CHECK(parse_chat_request(chat_body(R"("grammar":"root ::= \"x\"")")).grammar.gbnf == "root ::= \"x\"");
  CHECK(parse_chat_request(chat_body(R"("json_schema":{"type":"integer"})")).grammar.param == "json_schema");
}

TEST_CASE("structured output: an unsupported schema keyword is a 400 naming it and its pointer") {
  const BadRequest e = refusal(chat_body(
      R"("response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object",)"
      R"("properties":{"tags":{"type":"array","uniqueItems":true}}}}})"));
  CHECK(e.param() == "response_format.json_schema.schema");
  const std::string what = e.what();
  CHECK(what.find("uniqueItems") != std::string::npos);
  CHECK(what.find("/properties/tags") != std::string::npos);
  CHECK(std::string(refusal(chat_body(R"("json_schema":{"not":{}})")).what()).find("'not'") != std::string::npos);
}

TEST_CASE("structured output: malformed, conflicting and oversized fields are 400s") {
  CHECK(refusal(chat_body(R"("response_format":"json")")).param() == "response_format");
  CHECK(refusal(chat_body(R"("response_format":{"type":"xml"})")).param() == "response_format.type");
  CHECK(refusal(chat_body(R"("response_format":{"type":"json_schema"})")).param() == "response_format.json_schema");
  CHECK(refusal(chat_body(R"("response_format":{"type":"json_schema","json_schema":{"strict":1,"schema":{}}})"))
            .param() == "response_format.json_schema.strict");
  CHECK(refusal(chat_body(R"("grammar":5)")).param() == "grammar");
  CHECK(refusal(chat_body(R"("grammar":"root ::= \"x\"","json_schema":{})")).param() == "grammar");
  CHECK(refusal(chat_body(R"("json_schema":"x")")).param() == "json_schema");
  RequestLimits small;
  small.output.max_grammar_bytes = 8;
  small.output.max_schema_bytes = 8;
  CHECK_THROWS_AS(parse_chat_request(chat_body(R"("grammar":"root ::= \"xxxxxxxx\"")"), small), BadRequest);
  CHECK_THROWS_AS(parse_chat_request(chat_body(R"("json_schema":{"type":"string","maxLength":3})"), small),
                  BadRequest);
  // A deeply nested schema is refused, not a stack overflow.
  std::string deep = R"({"type":"array","items":)";
  std::string nested;
  for (int i = 0; i < 200; ++i) nested += R"({"type":"array","items":)";
  nested += R"({"type":"integer"})";
  for (int i = 0; i < 200; ++i) nested += "}";
  CHECK_THROWS_AS(parse_chat_request(chat_body(R"("json_schema":)" + nested)), BadRequest);
}

TEST_CASE("logprobs: request fields") {
  CHECK(parse_chat_request(chat_body(R"("logprobs":false)")).top_logprobs == -1);
  CHECK(parse_chat_request(chat_body(R"("logprobs":true)")).top_logprobs == 0);
  CHECK(parse_chat_request(chat_body(R"("logprobs":true,"top_logprobs":3)")).top_logprobs == 3);
  CHECK(parse_completion_request(R"({"prompt":"x","logprobs":2})").top_logprobs == 2);
  CHECK(parse_completion_request(R"({"prompt":"x","logprobs":0})").top_logprobs == 0);
  CHECK(refusal(chat_body(R"("top_logprobs":3)")).param() == "top_logprobs");
  CHECK(refusal(chat_body(R"("logprobs":true,"top_logprobs":21)")).param() == "top_logprobs");
  CHECK(refusal(chat_body(R"("logprobs":"yes")")).param() == "logprobs");
  CHECK_THROWS_AS(parse_completion_request(R"({"prompt":"x","logprobs":-1})"), BadRequest);
}

TEST_CASE("logprobs: response shapes") {
  const std::vector<TokenLogprobs> tokens = {{{"He", -0.5f}, {{"He", -0.5f}, {"A", -1.5f}}}, {{"llo", -0.25f}, {}}};
  const auto chat = chat_logprobs(tokens);
  REQUIRE(chat["content"].size() == 2);
  CHECK(chat["content"][0]["token"] == "He");
  CHECK(chat["content"][0]["bytes"] == nlohmann::json::array({72, 101}));
  CHECK(chat["content"][0]["top_logprobs"][1]["token"] == "A");
  CHECK(chat["content"][1]["top_logprobs"].empty());
  const auto legacy = completion_logprobs(tokens, 10);
  CHECK(legacy["tokens"] == nlohmann::json::array({"He", "llo"}));
  CHECK(legacy["text_offset"] == nlohmann::json::array({10, 12}));
  CHECK(legacy["top_logprobs"][0]["A"] == -1.5);

  // A stream attaches each token's logprobs to the chunk of its text.
  CompletionShape shape;
  shape.chat = true;
  shape.stream = true;
  shape.logprobs = true;
  CompletionEvents events(shape);
  events.logprobs(tokens[0]);
  const std::string first = events.text("He");
  CHECK(first.find(R"("token":"He")") != std::string::npos);
  const std::string second = events.text("x");
  CHECK(second.find(R"("logprobs":{"content":[])") != std::string::npos);
}
