#include "server/tool_request.h"

#include <algorithm>
#include <set>

#include "server/openai_api.h"
#include "server/json_fields.h"

namespace ember::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;


bool valid_function_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::string string_field(const json& j, const char* name, const std::string& where, bool required) {
  if (!present(j, name)) {
    if (required) throw BadRequest("'" + where + "." + name + "' is required", where + "." + name);
    return {};
  }
  if (!j.at(name).is_string()) throw BadRequest("'" + where + "." + name + "' must be a string", where + "." + name);
  return j.at(name).get<std::string>();
}

// {"type": "function", "function": {...}} -> the function object, checked.
const json& function_of(const json& item, const std::string& where) {
  if (!item.is_object()) throw BadRequest("'" + where + "' must be an object", where);
  if (string_field(item, "type", where, /*required=*/true) != "function") {
    throw BadRequest("'" + where + ".type' must be \"function\" (the only tool type)", where + ".type");
  }
  if (!present(item, "function") || !item.at("function").is_object()) {
    throw BadRequest("'" + where + ".function' must be an object", where + ".function");
  }
  return item.at("function");
}

ToolDefinition parse_tool(const json& item, const ordered_json& ordered_item, const std::string& where,
                          const ToolLimits& limits) {
  const json& fn = function_of(item, where);
  const std::string fw = where + ".function";
  ToolDefinition t;
  t.name = string_field(fn, "name", fw, /*required=*/true);
  if (!valid_function_name(t.name)) {
    throw BadRequest("'" + fw + ".name' must be 1 to 64 characters of a-z, A-Z, 0-9, '_' and '-'", fw + ".name");
  }
  t.description = string_field(fn, "description", fw, /*required=*/false);
  if (present(fn, "strict") && !fn.at("strict").is_boolean()) {
    throw BadRequest("'" + fw + ".strict' must be a boolean", fw + ".strict");
  }
  if (present(fn, "parameters")) {
    const json& p = fn.at("parameters");
    if (!p.is_object()) throw BadRequest("'" + fw + ".parameters' must be a JSON Schema object", fw + ".parameters");
    // Written order: the order the model is shown the arguments in and writes them in.
    t.parameters = ordered_item.at("function").at("parameters").dump();
    if (t.parameters.size() > limits.max_schema_bytes) {
      throw BadRequest("'" + fw + ".parameters' is larger than " + std::to_string(limits.max_schema_bytes) + " bytes",
                       fw + ".parameters");
    }
  }
  return t;
}

}  // namespace

ToolRequest parse_tool_request(const json& j, const std::string& body, const ToolLimits& limits) {
  ToolRequest r;
  if (present(j, "tools")) {
    const json& tools = j.at("tools");
    if (!tools.is_array()) throw BadRequest("'tools' must be an array of function tools", "tools");
    if (tools.size() > limits.max_tools) {
      throw BadRequest("'tools' has more than " + std::to_string(limits.max_tools) + " entries", "tools");
    }
    if (!tools.empty()) {
      const ordered_json ordered = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false).at("tools");
      std::set<std::string> names;
      for (size_t i = 0; i < tools.size(); ++i) {
        const std::string where = "tools[" + std::to_string(i) + "]";
        ToolDefinition t = parse_tool(tools[i], ordered[i], where, limits);
        if (!names.insert(t.name).second) {
          throw BadRequest("'" + where + ".function.name': '" + t.name + "' is defined twice", where + ".function.name");
        }
        r.tools.push_back(std::move(t));
      }
      r.choice = ToolChoice::Auto;
    }
  }
  if (present(j, "tool_choice")) {
    const json& c = j.at("tool_choice");
    if (c.is_string()) {
      const std::string s = c.get<std::string>();
      if (s == "none") r.choice = ToolChoice::None;
      else if (s == "auto") r.choice = r.tools.empty() ? ToolChoice::None : ToolChoice::Auto;
      else if (s == "required") r.choice = ToolChoice::Required;
      else throw BadRequest("'tool_choice' must be \"none\", \"auto\", \"required\" or a function", "tool_choice");
    } else if (c.is_object()) {
      const json& fn = function_of(c, "tool_choice");
      r.named = string_field(fn, "name", "tool_choice.function", /*required=*/true);
      r.choice = ToolChoice::Named;
      const bool known = std::any_of(r.tools.begin(), r.tools.end(), [&](const ToolDefinition& t) {
        return t.name == r.named;
      });
      if (!known) {
        throw BadRequest("'tool_choice' names the function '" + r.named.substr(0, 64) + "', which is not in 'tools'",
                         "tool_choice");
      }
    } else {
      throw BadRequest("'tool_choice' must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                       "tool_choice");
    }
    if (r.choice == ToolChoice::Required && r.tools.empty()) {
      throw BadRequest("'tool_choice' \"required\" needs 'tools'", "tool_choice");
    }
  }
  if (present(j, "parallel_tool_calls")) {
    if (!j.at("parallel_tool_calls").is_boolean()) {
      throw BadRequest("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    }
    r.parallel = j.at("parallel_tool_calls").get<bool>();
  }
  return r;
}

std::vector<ToolCall> parse_message_tool_calls(const json& calls, const std::string& where, const ToolLimits& limits) {
  const std::string field = where + ".tool_calls";
  if (!calls.is_array()) throw BadRequest("'" + field + "' must be an array", field);
  if (calls.size() > limits.max_calls_per_message) {
    throw BadRequest("'" + field + "' has more than " + std::to_string(limits.max_calls_per_message) + " entries",
                     field);
  }
  std::vector<ToolCall> out;
  out.reserve(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string cw = field + "[" + std::to_string(i) + "]";
    const json& fn = function_of(calls[i], cw);
    ToolCall c;
    c.id = string_field(calls[i], "id", cw, /*required=*/false);
    c.name = string_field(fn, "name", cw + ".function", /*required=*/true);
    // Arguments as the client sent them: JSON text, rendered back into the prompt as written.
    c.arguments = string_field(fn, "arguments", cw + ".function", /*required=*/false);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace ember::server
