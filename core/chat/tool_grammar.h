#pragma once
// The grammar that makes a reply a well-formed tool call (tool_choice required or a named
// function), or, for the generic syntax, one of its two reply objects (auto). Each call names a
// declared function and its arguments are valid against that function's parameters schema
// (core/grammar/json_schema.h). The spacing is the one tool_prompt.cpp writes in the history.
#include <span>
#include <string>
#include <string_view>

#include "core/chat/chat_render.h"
#include "core/chat/tool_calls.h"

namespace ember {

enum class ToolChoice { None, Auto, Required, Named };

// GBNF text, or "" when the reply stays unconstrained (none; auto with a family's own syntax, whose
// model decides between text and a call). `named` is the function for ToolChoice::Named and must be
// one of `tools`, called once; `parallel`: several calls in one reply (required, auto) where the
// syntax has room for them.
// Throws std::invalid_argument "tools[i].function.parameters: ..." for a schema the compiler
// cannot enforce (the message of its grammar::SchemaError), or for an unknown `named`.
std::string tool_call_gbnf(ToolSyntax syntax, std::span<const ToolDefinition> tools, ToolChoice choice,
                           std::string_view named, bool parallel);

}  // namespace ember
