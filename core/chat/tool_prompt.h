#pragma once
// A conversation as the turns render_chat lays out (internal to core/chat): each message's role
// checked, and everything about tools written in the family's tool syntax (tool_calls.h):
//   - the tool definitions: Hermes and generic in the system turn (a new one first when there is
//     none), llama-3.1 at the top of the first user turn, mistral v0.3 as [AVAILABLE_TOOLS] before
//     the last user turn;
//   - an assistant's tool calls, after its text, as the model itself would write them;
//   - tool results: llama-3.1's ipython turn, mistral's [TOOL_RESULTS] block, Hermes's
//     <tool_response> blocks in one user turn per run of results, and a user turn elsewhere.
// With tools, a generic family's plain assistant replies are written as {"response": "..."}: the
// only other shape its constrained output can take, so the history shows the model that shape.
// The tools' text (names, descriptions, schemas) and the calls' arguments are message content:
// tokenized as plain text, never as special tokens.
#include <span>
#include <vector>

#include "core/chat/chat_render.h"
#include "core/chat/chat_text.h"

namespace ember::chat_detail {

// Throws std::invalid_argument naming an unknown role and the message's index.
std::vector<Turn> conversation_turns(ChatTemplate t, std::span<const ChatMessage> messages,
                                     std::span<const ToolDefinition> tools);

}  // namespace ember::chat_detail
