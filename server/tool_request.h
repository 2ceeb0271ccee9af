#pragma once
// The request fields about tools: `tools` (function definitions), `tool_choice`,
// `parallel_tool_calls`, and the tool calls of assistant messages in the history. Checked here,
// on the request's own thread; the grammar that enforces a required or named call is built later,
// once the chat template is known (prepare_completion_job). No HTTP here.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/chat/chat_render.h"
#include "core/chat/tool_grammar.h"

namespace ember::server {

struct ToolLimits {
  size_t max_tools = 128;
  size_t max_calls_per_message = 128;
  size_t max_schema_bytes = 256 * 1024;  // one function's parameters, as compact JSON
};

struct ToolRequest {
  std::vector<ToolDefinition> tools;
  ToolChoice choice = ToolChoice::None;  // auto when tools are given and tool_choice is not
  std::string named;                     // ToolChoice::Named: the function
  bool parallel = true;                  // parallel_tool_calls
  // Whether the reply is read for tool calls: tools were given and may be called.
  bool active() const { return choice != ToolChoice::None && !tools.empty(); }
};

// Reads `tools`, `tool_choice` and `parallel_tool_calls` from the request (`body`: its text, for
// the parameters' key order). Throws BadRequest naming the field: a malformed definition, a name
// OpenAI would refuse (1-64 of a-z, A-Z, 0-9, '_', '-') or given twice, tool_choice required or
// named without tools or naming an unknown function, more than the limits allow.
ToolRequest parse_tool_request(const nlohmann::json& request, const std::string& body, const ToolLimits& limits);

// An assistant message's `tool_calls` ([{id, type: "function", function: {name, arguments}}]);
// `where` is the message's path for errors ("messages[3]"). Throws BadRequest.
std::vector<ToolCall> parse_message_tool_calls(const nlohmann::json& calls, const std::string& where,
                                               const ToolLimits& limits);

}  // namespace ember::server
