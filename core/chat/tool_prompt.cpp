#include "core/chat/tool_prompt.h"

#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "core/chat/tool_calls.h"

namespace ember::chat_detail {
namespace {

using nlohmann::ordered_json;

// The instructions are template text (markup): the tags in them are the family's own markers.
// Their wording is Ember's; the call shapes they show are the ones each model family was trained
// to write (tool_calls.h).
constexpr const char* kHermesToolsOpen =
    "# Tools\n\nYou can call functions to help with the user's request. Their signatures are inside "
    "<tools></tools> XML tags:\n<tools>";
constexpr const char* kHermesToolsClose =
    "\n</tools>\n\nTo call a function, write a JSON object with its name and arguments inside "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call>";
constexpr const char* kLlama3ToolsOpen =
    "You have access to the functions below. To call one, reply with only a JSON object of the form "
    "{\"name\": function name, \"parameters\": object of argument names and their values}. Do not use "
    "variables.\n\n";
constexpr const char* kGenericToolsOpen =
    "You can call the functions listed below. Reply with one JSON object and nothing else: "
    "{\"tool_calls\": [{\"name\": <function name>, \"arguments\": <object of argument values>}]} to call "
    "one or more of them, or {\"response\": <your reply as a string>} to answer directly.\n\nFunctions:";

Role role_of(const ChatMessage& m, size_t index) {
  if (m.role == "system" || m.role == "developer") return Role::System;
  if (m.role == "user") return Role::User;
  if (m.role == "assistant") return Role::Assistant;
  if (m.role == "tool") return Role::Tool;
  throw std::invalid_argument("unknown chat role '" + m.role + "' in message " + std::to_string(index) +
                              " (expected system, developer, user, assistant or tool)");
}

// JSON text as a value; text that is not JSON (a client's malformed arguments) as a JSON string.
ordered_json json_or_string(const std::string& text) {
  ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ordered_json(text);
  return j;
}

ordered_json tool_json(const ToolDefinition& t) {
  ordered_json fn = ordered_json::object();
  fn["name"] = t.name;
  if (!t.description.empty()) fn["description"] = t.description;
  fn["parameters"] = t.parameters.empty() ? ordered_json{{"type", "object"}, {"properties", ordered_json::object()}}
                                          : json_or_string(t.parameters);
  return ordered_json{{"type", "function"}, {"function", std::move(fn)}};
}

ordered_json call_json(const ToolCall& c, const char* arguments_key) {
  return ordered_json{{"name", c.name}, {arguments_key, json_or_string(c.arguments.empty() ? "{}" : c.arguments)}};
}

ChatText assistant_body(ToolSyntax syntax, const ChatMessage& m, bool with_tools) {
  ChatText body;
  if (m.tool_calls.empty()) {
    if (syntax == ToolSyntax::Generic && with_tools) {
      body.content(python_style_json(ordered_json{{"response", m.content}}));
    } else {
      body.content(m.content);
    }
    return body;
  }
  switch (syntax) {
    case ToolSyntax::Hermes:
      body.content(m.content);
      for (const ToolCall& c : m.tool_calls) {
        if (!body.empty()) body.markup("\n");
        body.markup("<tool_call>\n");
        body.content(python_style_json(call_json(c, "arguments")));
        body.markup("\n</tool_call>");
      }
      break;
    case ToolSyntax::Llama3:
      body.content(m.content);
      for (const ToolCall& c : m.tool_calls) {
        if (!body.empty()) body.markup("\n");
        body.content(python_style_json(call_json(c, "parameters")));
      }
      break;
    case ToolSyntax::Mistral: {
      body.content(m.content);
      ordered_json calls = ordered_json::array();
      for (const ToolCall& c : m.tool_calls) {
        ordered_json call = call_json(c, "arguments");
        if (!c.id.empty()) call["id"] = c.id;
        calls.push_back(std::move(call));
      }
      body.markup("[TOOL_CALLS] ");
      body.content(python_style_json(calls));
      break;
    }
    case ToolSyntax::Generic: {
      // The reply's text has no place in the one-object form; the calls are what the model did.
      ordered_json calls = ordered_json::array();
      for (const ToolCall& c : m.tool_calls) calls.push_back(call_json(c, "arguments"));
      body.content(python_style_json(ordered_json{{"tool_calls", std::move(calls)}}));
      break;
    }
  }
  return body;
}

// One tool result inside a turn that may hold several (Hermes, generic); `name` from the call.
void append_result(ToolSyntax syntax, ChatText& body, const ChatMessage& m, const std::string& name) {
  if (!body.empty()) body.markup("\n");
  if (syntax == ToolSyntax::Hermes) {
    body.markup("<tool_response>\n");
    body.content(m.content);
    body.markup("\n</tool_response>");
    return;
  }
  ordered_json result = ordered_json::object();
  if (!m.tool_call_id.empty()) result["id"] = m.tool_call_id;
  if (!name.empty()) result["name"] = name;
  result["content"] = m.content;
  body.content(python_style_json(ordered_json{{"tool_response", std::move(result)}}));
}

ChatText tools_block(ToolSyntax syntax, std::span<const ToolDefinition> tools) {
  ChatText block;
  switch (syntax) {
    case ToolSyntax::Hermes:
      block.markup(kHermesToolsOpen);
      for (const ToolDefinition& t : tools) {
        block.markup("\n");
        block.content(python_style_json(tool_json(t)));
      }
      block.markup(kHermesToolsClose);
      break;
    case ToolSyntax::Llama3:
      block.markup(kLlama3ToolsOpen);
      for (const ToolDefinition& t : tools) {
        block.content(python_style_json(tool_json(t)));
        block.markup("\n\n");
      }
      break;
    case ToolSyntax::Mistral: {
      ordered_json all = ordered_json::array();
      for (const ToolDefinition& t : tools) all.push_back(tool_json(t));
      block.markup("[AVAILABLE_TOOLS] ");
      block.content(python_style_json(all));
      block.markup("[/AVAILABLE_TOOLS]");
      break;
    }
    case ToolSyntax::Generic:
      block.markup(kGenericToolsOpen);
      for (const ToolDefinition& t : tools) {
        block.markup("\n");
        block.content(python_style_json(tool_json(t)));
      }
      break;
  }
  return block;
}

void place_tools_block(ToolSyntax syntax, std::vector<Turn>& turns, ChatText block) {
  auto find_user = [&](bool last) -> Turn* {
    Turn* found = nullptr;
    for (Turn& t : turns) {
      if (t.role != Role::User) continue;
      found = &t;
      if (!last) break;
    }
    return found;
  };
  if (syntax == ToolSyntax::Mistral) {
    Turn* user = find_user(/*last=*/true);
    if (user == nullptr) {
      turns.push_back({Role::User, {}, {}});
      user = &turns.back();
    }
    user->preamble = std::move(block);
    return;
  }
  if (syntax == ToolSyntax::Llama3) {
    if (Turn* user = find_user(/*last=*/false)) {
      block.append(user->body.stripped());
      user->body = std::move(block);
      return;
    }
  }
  if (!turns.empty() && turns.front().role == Role::System) {
    Turn& system = turns.front();
    if (!system.body.empty()) system.body.markup("\n\n");
    system.body.append(block);
  } else {
    turns.insert(turns.begin(), Turn{Role::System, std::move(block), {}});
  }
}

}  // namespace

std::vector<Turn> conversation_turns(ChatTemplate t, std::span<const ChatMessage> messages,
                                     std::span<const ToolDefinition> tools) {
  const ToolSyntax syntax = tool_syntax(t);
  const bool native_tool_turn = syntax == ToolSyntax::Llama3 || syntax == ToolSyntax::Mistral;
  std::map<std::string, std::string, std::less<>> call_names;  // call id -> function name
  std::vector<Turn> turns;
  turns.reserve(messages.size() + 1);
  bool previous_was_result = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const Role role = role_of(m, i);
    const bool result = role == Role::Tool;
    if (role == Role::Assistant) {
      for (const ToolCall& c : m.tool_calls) call_names[c.id] = c.name;
      turns.push_back({Role::Assistant, assistant_body(syntax, m, !tools.empty()), {}});
    } else if (!result) {
      turns.push_back({role, ChatText::of_content(m.content), {}});
    } else if (syntax == ToolSyntax::Llama3) {
      turns.push_back({Role::Tool, ChatText::of_content(m.content), {}});
    } else if (syntax == ToolSyntax::Mistral) {
      ChatText body;
      body.markup("[TOOL_RESULTS] ");
      body.content(python_style_json(ordered_json{{"content", m.content}, {"call_id", m.tool_call_id}}));
      body.markup("[/TOOL_RESULTS]");
      turns.push_back({Role::Tool, std::move(body), {}});
    } else {
      // A run of results is one user turn.
      if (!previous_was_result) turns.push_back({Role::User, {}, {}});
      std::string name = m.name;
      if (auto it = call_names.find(m.tool_call_id); name.empty() && it != call_names.end()) name = it->second;
      append_result(syntax, turns.back().body, m, name);
    }
    previous_was_result = result && !native_tool_turn;
  }
  if (!tools.empty()) place_tools_block(syntax, turns, tools_block(syntax, tools));
  return turns;
}

}  // namespace ember::chat_detail
