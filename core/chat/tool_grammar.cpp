#include "core/chat/tool_grammar.h"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "core/grammar/gbnf_text.h"
#include "core/grammar/json_schema.h"

namespace ember {
namespace {

using nlohmann::ordered_json;
using grammar::gbnf_literal;

// One alternative per callable function: its name as a literal, its arguments as its schema's rule.
struct CallRules {
  std::string alternatives;  // "call0 | call1 | ..."
  std::string rules;
};

CallRules call_rules(ToolSyntax syntax, std::span<const ToolDefinition> tools, ToolChoice choice,
                     std::string_view named) {
  const char* arguments_key = syntax == ToolSyntax::Llama3 ? "parameters" : "arguments";
  CallRules out;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolDefinition& t = tools[i];
    if (choice == ToolChoice::Named && t.name != named) continue;
    const std::string where = "tools[" + std::to_string(i) + "].function.parameters";
    std::string arguments = "object";  // no schema: any object
    if (!t.parameters.empty()) {
      ordered_json schema = ordered_json::parse(t.parameters, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) throw std::invalid_argument(where + ": not JSON");
      try {
        grammar::SchemaFragment f = grammar::json_schema_fragment(schema, "t" + std::to_string(i) + "-");
        arguments = f.root;
        out.rules += f.rules;
      } catch (const grammar::SchemaError& e) {
        throw std::invalid_argument(where + ": " + e.what());
      }
    }
    const std::string rule = "call" + std::to_string(i);
    const std::string head = "{\"name\": " + ordered_json(t.name).dump() + ", \"" + arguments_key + "\": ";
    out.rules += rule + " ::= " + gbnf_literal(head) + " " + arguments + " \"}\"\n";
    out.alternatives += (out.alternatives.empty() ? "" : " | ") + rule;
  }
  if (out.alternatives.empty()) {
    throw std::invalid_argument("tool_choice names the function '" + std::string(named) +
                                "', which is not among the tools");
  }
  return out;
}

}  // namespace

std::string tool_call_gbnf(ToolSyntax syntax, std::span<const ToolDefinition> tools, ToolChoice choice,
                           std::string_view named, bool parallel) {
  if (choice == ToolChoice::None || tools.empty()) return {};
  if (choice == ToolChoice::Auto && syntax != ToolSyntax::Generic) return {};
  const CallRules calls = call_rules(syntax, tools, choice, named);
  // A named function is called once, as OpenAI does when a function is forced.
  if (choice == ToolChoice::Named) parallel = false;
  std::string root;
  switch (syntax) {
    case ToolSyntax::Hermes:
      root = "root ::= hermes-call" + std::string(parallel ? " (\"\\n\" hermes-call)*" : "") + "\n" +
             "hermes-call ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n";
      break;
    case ToolSyntax::Llama3: root = "root ::= call\n"; break;  // llama-3.1 makes one call per reply
    case ToolSyntax::Mistral:
      root = "root ::= \"[\" call" + std::string(parallel ? " (\", \" call)*" : "") + " \"]\"\n";
      break;
    case ToolSyntax::Generic: {
      const std::string list = "\"{\\\"tool_calls\\\": [\" call" + std::string(parallel ? " (\", \" call)*" : "") +
                               " \"]}\"";
      root = choice == ToolChoice::Auto ? "root ::= " + list + " | \"{\\\"response\\\": \" string \"}\"\n"
                                        : "root ::= " + list + "\n";
      break;
    }
  }
  return root + "call ::= " + calls.alternatives + "\n" + calls.rules + grammar::json_primitive_rules();
}

}  // namespace ember
