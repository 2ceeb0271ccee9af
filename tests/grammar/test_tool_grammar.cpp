// The grammar of a required or named tool call (core/chat/tool_grammar.h): random walks through its
// mask, in every syntax, must give replies that parse_tool_reply reads as calls of declared
// functions whose arguments validate; named and single-call choices are kept; bad schemas name the tool.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "core/chat/tool_calls.h"
#include "core/chat/tool_grammar.h"
#include "tests/grammar/grammar_test_util.h"
#include "tests/grammar/mini_validator.h"
#include "tests/grammar/random_walk.h"

using ember::ToolChoice;
using ember::ToolDefinition;
using ember::ToolSyntax;
using ember::grammar::Grammar;
using ember::grammar::Matcher;
using json = nlohmann::json;

namespace {

const std::vector<ToolDefinition> kTools{
    {"get_weather", "", R"({"type":"object","properties":{"city":{"type":"string","maxLength":6},
      "unit":{"enum":["C","F"]}},"required":["city","unit"],"additionalProperties":false})"},
    {"add", "", R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},
      "required":["a","b"],"additionalProperties":false})"},
    {"ping", "", ""},
};

const json* schema_of(const std::string& name) {
  static const std::vector<json> schemas = [] {
    std::vector<json> out;
    for (const auto& t : kTools) out.push_back(t.parameters.empty() ? json{{"type", "object"}} : json::parse(t.parameters));
    return out;
  }();
  for (size_t i = 0; i < kTools.size(); ++i) {
    if (kTools[i].name == name) return &schemas[i];
  }
  return nullptr;
}

// Walks the grammar `n` times; every reply must be calls only, of declared functions (`only`, when
// given), valid arguments, at most one call unless parallel.
void walk(ToolSyntax syntax, ToolChoice choice, const std::string& only, bool parallel, int n, bool allow_response) {
  const std::string gbnf = ember::tool_call_gbnf(syntax, kTools, choice, only, parallel);
  REQUIRE_FALSE(gbnf.empty());
  const auto g = Grammar::parse(gbnf);
  std::mt19937 rng(static_cast<uint32_t>(static_cast<int>(syntax) * 100 + static_cast<int>(choice)));
  int calls = 0, responses = 0;
  for (int i = 0; i < n; ++i) {
    Matcher m(g, ember::grammar::test::walk_vocab());
    const auto text = ember::grammar::test::random_walk(m, rng, 30 + i);
    REQUIRE(text.has_value());
    INFO("reply: " << *text);
    const ember::ToolReply reply = ember::parse_tool_reply(syntax, *text);
    if (reply.calls.empty()) {
      CHECK(allow_response);
      ++responses;
      continue;
    }
    CHECK(reply.content.empty());
    if (!parallel || choice == ToolChoice::Named) CHECK(reply.calls.size() == 1);
    for (const auto& c : reply.calls) {
      const json* schema = schema_of(c.name);
      REQUIRE(schema != nullptr);
      if (!only.empty()) CHECK(c.name == only);
      const json args = json::parse(c.arguments);
      CHECK(ember::grammar::test::validate(args, *schema, *schema));
      ++calls;
    }
  }
  CHECK(calls > 0);
  if (allow_response) CHECK(responses + calls >= n);
}

}  // namespace

TEST_CASE("tool grammar: required calls parse and validate in every syntax") {
  for (ToolSyntax s : {ToolSyntax::Hermes, ToolSyntax::Llama3, ToolSyntax::Mistral, ToolSyntax::Generic}) {
    CAPTURE(static_cast<int>(s));
    walk(s, ToolChoice::Required, "", /*parallel=*/true, 20, false);
    walk(s, ToolChoice::Required, "", /*parallel=*/false, 10, false);
  }
}

TEST_CASE("tool grammar: a named choice calls only that function, once") {
  for (ToolSyntax s : {ToolSyntax::Hermes, ToolSyntax::Llama3, ToolSyntax::Mistral, ToolSyntax::Generic}) {
    CAPTURE(static_cast<int>(s));
    walk(s, ToolChoice::Named, "add", /*parallel=*/true, 10, false);
  }
}

TEST_CASE("tool grammar: auto constrains only the generic syntax, to a call or a response") {
  for (ToolSyntax s : {ToolSyntax::Hermes, ToolSyntax::Llama3, ToolSyntax::Mistral}) {
    CHECK(ember::tool_call_gbnf(s, kTools, ToolChoice::Auto, "", true).empty());
  }
  CHECK(ember::tool_call_gbnf(ToolSyntax::Generic, kTools, ToolChoice::None, "", true).empty());
  walk(ToolSyntax::Generic, ToolChoice::Auto, "", true, 30, /*allow_response=*/true);
  const auto g = Grammar::parse(ember::tool_call_gbnf(ToolSyntax::Generic, kTools, ToolChoice::Auto, "", true));
  CHECK(ember::grammar::test::matches(g, R"({"response": "hi"})"));
  CHECK(ember::grammar::test::matches(g, R"({"tool_calls": [{"name": "ping", "arguments": {}}]})"));
  CHECK_FALSE(ember::grammar::test::matches(g, R"({"tool_calls": [{"name": "nope", "arguments": {}}]})"));
  CHECK_FALSE(ember::grammar::test::matches(g, R"({"tool_calls": []})"));
}

TEST_CASE("tool grammar: a schema it cannot enforce names the tool; an unknown named function is refused") {
  std::vector<ToolDefinition> tools = kTools;
  tools.push_back({"bad", "", R"({"type":"object","properties":{"x":{"type":"array","uniqueItems":true}}})"});
  try {
    ember::tool_call_gbnf(ToolSyntax::Hermes, tools, ToolChoice::Required, "", true);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("tools[3].function.parameters") != std::string::npos);
    CHECK(std::string(e.what()).find("uniqueItems") != std::string::npos);
  }
  CHECK_THROWS_AS(ember::tool_call_gbnf(ToolSyntax::Hermes, kTools, ToolChoice::Named, "nope", true),
                  std::invalid_argument);
}
