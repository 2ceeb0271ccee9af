// Tools in the prompt (core/chat/tool_prompt.cpp through render_chat): definitions, an assistant's
// calls and the results, in each family's tool syntax; their JSON is content, the markers template.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/chat/chat_render.h"

using ember::ChatMessage;
using ember::ChatTemplate;
using ember::RenderedChat;
using ember::ToolCall;
using ember::ToolDefinition;

namespace {

const std::vector<ToolDefinition> kTools{
    {"get_weather", "Weather now", R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"}};
const std::string kToolJson =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather now", "parameters": )"
    R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})";

std::vector<ChatMessage> conversation() {
  ChatMessage call{"assistant", ""};
  call.tool_calls.push_back(ToolCall{"c1", "get_weather", R"({"city":"Oslo"})"});
  ChatMessage result{"tool", "12C"};
  result.tool_call_id = "c1";
  return {{"system", "S"}, {"user", "U"}, call, result};
}

RenderedChat render(ChatTemplate t, const std::vector<ChatMessage>& msgs, bool with_tools = true) {
  return ember::render_chat(t, msgs, true, "<s>", "</s>", with_tools ? std::span(kTools) : std::span<const ToolDefinition>());
}

bool in_content(const RenderedChat& r, const std::string& needle) {
  const size_t at = r.text.find(needle);
  if (at == std::string::npos) return false;
  for (const auto& s : r.segments) {
    if (s.offset <= at && at + needle.size() <= s.offset + s.length) return s.is_content;
  }
  return false;
}

bool in_markup(const RenderedChat& r, const std::string& needle) {
  const size_t at = r.text.find(needle);
  if (at == std::string::npos) return false;
  for (const auto& s : r.segments) {
    if (s.offset <= at && at + needle.size() <= s.offset + s.length) return !s.is_content;
  }
  return false;
}

}  // namespace

TEST_CASE("chatml (Hermes): tools in the system turn, <tool_call> blocks, results in <tool_response>") {
  const RenderedChat r = render(ChatTemplate::ChatML, conversation());
  CHECK(r.text.starts_with("<|im_start|>system\nS\n\n# Tools\n\n"));
  CHECK(r.text.find("<tools>\n" + kToolJson + "\n</tools>") != std::string::npos);
  CHECK(r.text.find("<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n<tool_call>\n"
                    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n") !=
        std::string::npos);
  CHECK(r.text.ends_with("<|im_start|>user\n<tool_response>\n12C\n</tool_response><|im_end|>\n<|im_start|>assistant\n"));
  CHECK(in_content(r, kToolJson));
  CHECK(in_markup(r, "<tool_call>"));
  CHECK(in_content(r, "12C"));
}

TEST_CASE("chatml: a run of results is one user turn; no system message gets one for the tools") {
  std::vector<ChatMessage> msgs = conversation();
  msgs.erase(msgs.begin());
  ChatMessage second{"tool", "rain"};
  second.tool_call_id = "c2";
  msgs.push_back(second);
  const RenderedChat r = render(ChatTemplate::ChatML, msgs);
  CHECK(r.text.starts_with("<|im_start|>system\n# Tools"));
  CHECK(r.text.find("<tool_response>\n12C\n</tool_response>\n<tool_response>\nrain\n</tool_response><|im_end|>") !=
        std::string::npos);
}

TEST_CASE("llama-3: tools open the first user turn, calls as JSON, results in an ipython turn") {
  const RenderedChat r = render(ChatTemplate::Llama3, conversation());
  CHECK(r.text.find("<|start_header_id|>user<|end_header_id|>\n\nYou have access to the functions below.") !=
        std::string::npos);
  CHECK(r.text.find(kToolJson + "\n\nU<|eot_id|>") != std::string::npos);
  CHECK(r.text.find("<|start_header_id|>assistant<|end_header_id|>\n\n"
                    "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}<|eot_id|>") != std::string::npos);
  CHECK(r.text.ends_with("<|start_header_id|>ipython<|end_header_id|>\n\n12C<|eot_id|>"
                         "<|start_header_id|>assistant<|end_header_id|>\n\n"));
}

TEST_CASE("mistral v0.3: [AVAILABLE_TOOLS] before the last [INST], [TOOL_CALLS], [TOOL_RESULTS]") {
  const RenderedChat r = render(ChatTemplate::Mistral, conversation());
  CHECK(r.text == "<s>[AVAILABLE_TOOLS] [" + kToolJson + "][/AVAILABLE_TOOLS][INST] S\nU [/INST]"
                  "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}, \"id\": \"c1\"}]</s>"
                  "[TOOL_RESULTS] {\"content\": \"12C\", \"call_id\": \"c1\"}[/TOOL_RESULTS]");
  CHECK(in_markup(r, "[AVAILABLE_TOOLS]"));
  CHECK(in_markup(r, "[TOOL_RESULTS]"));
  CHECK(in_content(r, "{\"content\": \"12C\", \"call_id\": \"c1\"}"));
}

TEST_CASE("generic (llama-2): instructions in the system text, calls and replies as JSON, results as user turns") {
  std::vector<ChatMessage> msgs = conversation();
  msgs.push_back({"assistant", "It is 12C."});
  msgs.push_back({"user", "Thanks"});
  const RenderedChat r = render(ChatTemplate::Llama2, msgs);
  CHECK(r.text.starts_with("<s>[INST] <<SYS>>\nS\n\nYou can call the functions listed below."));
  CHECK(r.text.find("Functions:\n" + kToolJson + "\n<</SYS>>\n\nU [/INST]") != std::string::npos);
  CHECK(r.text.find(" {\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]} </s>") !=
        std::string::npos);
  CHECK(r.text.find("[INST] {\"tool_response\": {\"id\": \"c1\", \"name\": \"get_weather\", \"content\": \"12C\"}} [/INST]") !=
        std::string::npos);
  CHECK(r.text.find(" {\"response\": \"It is 12C.\"} </s>") != std::string::npos);
}

TEST_CASE("history with calls and results but no tools offered: the calls are still shown, replies stay text") {
  std::vector<ChatMessage> msgs = conversation();
  msgs.push_back({"assistant", "It is 12C."});
  const RenderedChat r = render(ChatTemplate::Llama2, msgs, /*with_tools=*/false);
  CHECK(r.text.find("You can call") == std::string::npos);
  CHECK(r.text.find("{\"tool_calls\": [") != std::string::npos);
  CHECK(r.text.find(" It is 12C. </s>") != std::string::npos);
}

TEST_CASE("arguments that are not JSON are shown as a string; the role list names tool") {
  ChatMessage call{"assistant", ""};
  call.tool_calls.push_back(ToolCall{"c1", "f", "not json"});
  const RenderedChat r = render(ChatTemplate::ChatML, {{"user", "U"}, call});
  CHECK(r.text.find("{\"name\": \"f\", \"arguments\": \"not json\"}") != std::string::npos);
  try {
    render(ChatTemplate::ChatML, {{"robot", "x"}});
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("tool") != std::string::npos);
  }
}
