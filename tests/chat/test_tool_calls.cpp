// Reading tool calls back out of generated text (core/chat/tool_calls.h), whole and streamed.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/chat/tool_calls.h"

using ember::parse_tool_reply;
using ember::ToolReply;
using ember::ToolReplyStream;
using ember::ToolSyntax;

namespace {

// The text a stream shows, and its calls, when `text` arrives cut at `cut` (and once more at the end).
ToolReply streamed(ToolSyntax syntax, const std::string& text, size_t cut) {
  ToolReplyStream s(syntax);
  std::string shown = s.push(text.substr(0, cut));
  shown += s.push(text.substr(cut));
  ToolReply r = s.finish();
  r.content.insert(0, shown);
  return r;
}

// Streamed in every two-piece cut and byte by byte, the result is the whole text's.
void check_streaming_agrees(ToolSyntax syntax, const std::string& text) {
  const ToolReply whole = parse_tool_reply(syntax, text);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const ToolReply r = streamed(syntax, text, cut);
    INFO("text: " << text << " cut at " << cut);
    CHECK(r.content == whole.content);
    REQUIRE(r.calls.size() == whole.calls.size());
    for (size_t i = 0; i < r.calls.size(); ++i) {
      CHECK(r.calls[i].name == whole.calls[i].name);
      CHECK(r.calls[i].arguments == whole.calls[i].arguments);
    }
  }
  ToolReplyStream s(syntax);
  std::string shown;
  for (char c : text) shown += s.push(std::string(1, c));
  ToolReply r = s.finish();
  CHECK(shown + r.content == whole.content);
  CHECK(r.calls.size() == whole.calls.size());
}

}  // namespace

TEST_CASE("tool_syntax: each family's own, generic for the rest") {
  CHECK(ember::tool_syntax(ember::ChatTemplate::ChatML) == ToolSyntax::Hermes);
  CHECK(ember::tool_syntax(ember::ChatTemplate::Llama3) == ToolSyntax::Llama3);
  CHECK(ember::tool_syntax(ember::ChatTemplate::Mistral) == ToolSyntax::Mistral);
  for (auto t : {ember::ChatTemplate::Llama2, ember::ChatTemplate::Zephyr, ember::ChatTemplate::Gemma,
                 ember::ChatTemplate::Phi3}) {
    CHECK(ember::tool_syntax(t) == ToolSyntax::Generic);
  }
}

TEST_CASE("hermes: text, then calls in <tool_call> blocks") {
  const std::string text =
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const ToolReply r = parse_tool_reply(ToolSyntax::Hermes, text);
  CHECK(r.content == "Let me look.\n");
  REQUIRE(r.calls.size() == 2);
  CHECK(r.calls[0].name == "get_weather");
  CHECK(r.calls[0].arguments == R"({"city":"Oslo"})");
  CHECK(r.calls[1].name == "get_time");
  CHECK(r.calls[1].arguments == "{}");
  check_streaming_agrees(ToolSyntax::Hermes, text);
}

TEST_CASE("hermes: a call cut by max_tokens or malformed stays text") {
  for (const std::string& text : {std::string("ok <tool_call>\n{\"name\": \"f\", \"argu"),
                                 std::string("<tool_call>\n{\"arguments\": {}}\n</tool_call>"),
                                 std::string("<tool_call>\nnot json\n</tool_call>"),
                                 std::string("<tool_call>\n{\"name\": \"f\"} trailing words")}) {
    const ToolReply r = parse_tool_reply(ToolSyntax::Hermes, text);
    CHECK(r.calls.empty());
    CHECK(r.content == text);
    check_streaming_agrees(ToolSyntax::Hermes, text);
  }
}

TEST_CASE("hermes: text that only looks like the marker's start is shown as soon as it cannot be") {
  ToolReplyStream s(ToolSyntax::Hermes);
  CHECK(s.push("a <tool") == "a ");
  CHECK(s.push("box> b") == "<toolbox> b");
  CHECK(s.finish().content.empty());
  check_streaming_agrees(ToolSyntax::Hermes, "x < y <tool_ <tool_call");
}

TEST_CASE("llama-3: a JSON object with name and parameters") {
  const std::string text = "{\"name\": \"search\", \"parameters\": {\"q\": \"ember\", \"n\": 3}}";
  const ToolReply r = parse_tool_reply(ToolSyntax::Llama3, text);
  CHECK(r.content.empty());
  REQUIRE(r.calls.size() == 1);
  CHECK(r.calls[0].name == "search");
  CHECK(r.calls[0].arguments == R"({"q":"ember","n":3})");
  check_streaming_agrees(ToolSyntax::Llama3, text);
  check_streaming_agrees(ToolSyntax::Llama3, "  {\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {}}");
  CHECK(parse_tool_reply(ToolSyntax::Llama3, "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\"}").calls.size() == 2);
}

TEST_CASE("llama-3: prose, and JSON that is not a call, are text") {
  for (const std::string& text : {std::string("Hello there {\"name\": 1}"), std::string("{\"answer\": 42}"),
                                 std::string("{\"name\": \"f\", \"parameters\": [1]}"), std::string("  ")}) {
    const ToolReply r = parse_tool_reply(ToolSyntax::Llama3, text);
    CHECK(r.calls.empty());
    CHECK(r.content == text);
    check_streaming_agrees(ToolSyntax::Llama3, text);
  }
}

TEST_CASE("mistral: a JSON array of calls, with or without the marker as text") {
  const std::string text = "[{\"name\": \"f\", \"arguments\": {\"x\": 1}}, {\"name\": \"g\", \"arguments\": \"{\\\"y\\\": 2}\"}]";
  for (const std::string& t : {text, " " + text, "[TOOL_CALLS] " + text}) {
    const ToolReply r = parse_tool_reply(ToolSyntax::Mistral, t);
    REQUIRE(r.calls.size() == 2);
    CHECK(r.calls[0].arguments == R"({"x":1})");
    CHECK(r.calls[1].name == "g");
    CHECK(r.calls[1].arguments == R"({"y":2})");  // double-encoded arguments are decoded once
    check_streaming_agrees(ToolSyntax::Mistral, t);
  }
  CHECK(parse_tool_reply(ToolSyntax::Mistral, "[1, 2]").content == "[1, 2]");
  CHECK(parse_tool_reply(ToolSyntax::Mistral, "[]").calls.empty());
}

TEST_CASE("generic: tool_calls, or a response whose string is streamed as it is decoded") {
  const std::string calls = "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}]}";
  ToolReply r = parse_tool_reply(ToolSyntax::Generic, calls);
  REQUIRE(r.calls.size() == 1);
  CHECK(r.calls[0].arguments == R"({"a":[1,2]})");
  CHECK(r.content.empty());
  check_streaming_agrees(ToolSyntax::Generic, calls);

  const std::string response = R"({"response": "Hi \"you\"\n\u00e9\ud83d\ude00 \\ end"})";
  r = parse_tool_reply(ToolSyntax::Generic, response);
  CHECK(r.calls.empty());
  CHECK(r.content == "Hi \"you\"\n\xC3\xA9\xF0\x9F\x98\x80 \\ end");
  check_streaming_agrees(ToolSyntax::Generic, response);

  ToolReplyStream s(ToolSyntax::Generic);
  CHECK(s.push("{\"response\": \"Hel").empty() == false);  // text flows before the reply ends
  CHECK(s.push("lo\\") == "lo");                            // an escape waits for its next byte
  CHECK(s.push("n\"}") == "\n");
  CHECK(s.finish().content.empty());
}

TEST_CASE("generic: a reply cut inside its response keeps what was decoded") {
  const ToolReply r = parse_tool_reply(ToolSyntax::Generic, R"({"response": "partial \u00)");
  CHECK(r.content == "partial ");
  CHECK(r.calls.empty());
}

TEST_CASE("python_style_json: json.dumps spacing, keys in order, non-ASCII kept") {
  const auto j = nlohmann::ordered_json::parse(R"({"b": [1, {"x": null}], "a": "é\"", "c": {}})");
  CHECK(ember::python_style_json(j) == "{\"b\": [1, {\"x\": null}], \"a\": \"é\\\"\", \"c\": {}}");
}
