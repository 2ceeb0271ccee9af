#include "core/chat/tool_calls.h"

#include <optional>

#include "core/chat/chat_text.h"
#include "core/tokenizer/utf8.h"

namespace ember {
namespace {

using nlohmann::ordered_json;
using chat_detail::trim;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";  // as text, where it is not a control token
// The generic reply that is not a call, exactly as its grammar writes it (tool_grammar.cpp).
constexpr std::string_view kResponseOpen = "{\"response\": \"";

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_blank(std::string_view s, size_t i) {
  while (i < s.size() && is_blank(s[i])) ++i;
  return i;
}

// The end of the JSON object or array that opens at s[begin], or npos when it is not complete.
// Only brackets outside strings count; whether the inside is valid JSON is the parser's to say.
size_t json_value_end(std::string_view s, size_t begin) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<ordered_json> parse_json(std::string_view s) {
  ordered_json j = ordered_json::parse(s, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// {"name": "f", "arguments" | "parameters": {...}}; arguments given as a JSON string are accepted
// when the string holds an object (some models double-encode).
std::optional<ToolCall> call_from(const ordered_json& o) {
  if (!o.is_object()) return std::nullopt;
  auto name = o.find("name");
  if (name == o.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  ToolCall call;
  call.name = name->get<std::string>();
  auto args = o.find("arguments");
  if (args == o.end()) args = o.find("parameters");
  if (args == o.end() || args->is_null()) {
    call.arguments = "{}";
  } else if (args->is_object()) {
    call.arguments = args->dump();
  } else if (args->is_string()) {
    const std::optional<ordered_json> inner = parse_json(args->get<std::string>());
    if (!inner || !inner->is_object()) return std::nullopt;
    call.arguments = inner->dump();
  } else {
    return std::nullopt;
  }
  return call;
}

// The JSON value (object or array) at s[i] (after blanks), advancing i past it.
std::optional<ordered_json> next_value(std::string_view s, size_t& i) {
  i = skip_blank(s, i);
  if (i >= s.size() || (s[i] != '{' && s[i] != '[')) return std::nullopt;
  const size_t end = json_value_end(s, i);
  if (end == std::string_view::npos) return std::nullopt;
  std::optional<ordered_json> v = parse_json(s.substr(i, end - i));
  if (v) i = end;
  return v;
}

bool calls_from_array(const ordered_json& a, std::vector<ToolCall>& out) {
  if (!a.is_array() || a.empty()) return false;
  for (const ordered_json& e : a) {
    std::optional<ToolCall> c = call_from(e);
    if (!c) return false;
    out.push_back(std::move(*c));
  }
  return true;
}

// Hermes: <tool_call> {json} </tool_call>, repeated. A block that does not parse, and everything
// after it, goes back to the text; text after the last block is kept as text too.
void parse_hermes(std::string_view held, ToolReply& reply) {
  size_t i = 0;
  while (true) {
    const size_t block = skip_blank(held, i);
    if (block >= held.size()) return;
    size_t j = block;
    std::optional<ToolCall> call;
    if (held.substr(j).starts_with(kHermesOpen)) {
      j += kHermesOpen.size();
      if (std::optional<ordered_json> v = next_value(held, j)) call = call_from(*v);
    }
    if (!call) {
      reply.content += held.substr(i);
      return;
    }
    j = skip_blank(held, j);
    if (held.substr(j).starts_with(kHermesClose)) {
      j += kHermesClose.size();
    } else if (skip_blank(held, j) < held.size()) {
      reply.content += held.substr(i);  // a call that is not closed before more text: not a call
      return;
    }
    reply.calls.push_back(std::move(*call));
    i = j;
  }
}

// llama-3: one or more call objects, separated by blanks or ';'.
bool parse_llama3(std::string_view held, ToolReply& reply) {
  std::vector<ToolCall> calls;
  size_t i = 0;
  while (skip_blank(held, i) < held.size()) {
    std::optional<ordered_json> v = next_value(held, i);
    std::optional<ToolCall> c = v ? call_from(*v) : std::nullopt;
    if (!c) return false;
    calls.push_back(std::move(*c));
    i = skip_blank(held, i);
    if (i < held.size() && held[i] == ';') ++i;
  }
  reply.calls = std::move(calls);
  return !reply.calls.empty();
}

bool parse_mistral(std::string_view held, ToolReply& reply) {
  size_t i = skip_blank(held, 0);
  if (held.substr(i).starts_with(kMistralMarker)) i += kMistralMarker.size();
  std::optional<ordered_json> v = next_value(held, i);
  if (!v || skip_blank(held, i) != held.size()) return false;
  std::vector<ToolCall> calls;
  if (!calls_from_array(*v, calls)) return false;
  reply.calls = std::move(calls);
  return true;
}

// {"tool_calls": [...]}, {"tool_call": {...}} or {"response": "..."}.
bool parse_generic(std::string_view held, ToolReply& reply) {
  size_t i = 0;
  std::optional<ordered_json> v = next_value(held, i);
  if (!v || !v->is_object() || skip_blank(held, i) != held.size()) return false;
  if (auto calls = v->find("tool_calls"); calls != v->end()) {
    std::vector<ToolCall> out;
    if (!calls_from_array(*calls, out)) return false;
    reply.calls = std::move(out);
    return true;
  }
  if (auto call = v->find("tool_call"); call != v->end()) {
    std::optional<ToolCall> c = call_from(*call);
    if (!c) return false;
    reply.calls.push_back(std::move(*c));
    return true;
  }
  if (auto text = v->find("response"); text != v->end() && text->is_string()) {
    reply.content += text->get<std::string>();
    return true;
  }
  return false;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// \uXXXX at s[i] (s[i] == '\\'): the code unit, -1 when malformed, -2 when s ends first.
int unicode_escape(std::string_view s, size_t i) {
  if (i + 6 > s.size()) return -2;
  if (s[i + 1] != 'u') return -1;
  int v = 0;
  for (size_t k = i + 2; k < i + 6; ++k) {
    const int h = hex_value(s[k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

void write_python_json(std::string& out, const ordered_json& v) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, value] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += ordered_json(key).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
      out += ": ";
      write_python_json(out, value);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t k = 0; k < v.size(); ++k) {
      if (k) out += ", ";
      write_python_json(out, v[k]);
    }
    out += ']';
  } else {
    out += v.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
}

}  // namespace

ToolSyntax tool_syntax(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::ChatML: return ToolSyntax::Hermes;
    case ChatTemplate::Llama3: return ToolSyntax::Llama3;
    case ChatTemplate::Mistral: return ToolSyntax::Mistral;
    case ChatTemplate::Llama2:
    case ChatTemplate::Zephyr:
    case ChatTemplate::Gemma:
    case ChatTemplate::Phi3: break;
  }
  return ToolSyntax::Generic;
}

std::string ToolReplyStream::push(std::string_view piece) {
  std::string out;
  pending_ += piece;
  if (state_ == State::Deciding) decide();
  switch (state_) {
    case State::Text:
      if (syntax_ == ToolSyntax::Hermes) {
        text_until_marker(out);
      } else {
        out += pending_;
        pending_.clear();
      }
      break;
    case State::Response: decode_response(out); break;
    case State::ResponseEnded: pending_.clear(); break;
    case State::Deciding:
    case State::Held: break;
  }
  return out;
}

void ToolReplyStream::decide() {
  if (syntax_ == ToolSyntax::Hermes) {
    state_ = State::Text;
    return;
  }
  const size_t first = skip_blank(pending_, 0);
  if (first == pending_.size()) return;  // only blanks so far
  const std::string_view rest = std::string_view(pending_).substr(first);
  switch (syntax_) {
    case ToolSyntax::Llama3: state_ = rest[0] == '{' ? State::Held : State::Text; return;
    case ToolSyntax::Mistral: state_ = rest[0] == '[' ? State::Held : State::Text; return;
    case ToolSyntax::Generic:
      if (rest.size() < kResponseOpen.size() && kResponseOpen.starts_with(rest)) return;  // not yet known
      if (rest.starts_with(kResponseOpen)) {
        pending_.erase(0, first + kResponseOpen.size());
        state_ = State::Response;
      } else {
        state_ = rest[0] == '{' ? State::Held : State::Text;
      }
      return;
    case ToolSyntax::Hermes: return;
  }
}

void ToolReplyStream::text_until_marker(std::string& out) {
  const size_t at = pending_.find(kHermesOpen);
  if (at != std::string::npos) {
    out += pending_.substr(0, at);
    pending_.erase(0, at);
    state_ = State::Held;
    return;
  }
  // Keep the longest tail that could still grow into the marker.
  size_t keep = std::min(pending_.size(), kHermesOpen.size() - 1);
  while (keep > 0 && !kHermesOpen.starts_with(std::string_view(pending_).substr(pending_.size() - keep))) --keep;
  out += pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
}

void ToolReplyStream::decode_response(std::string& out) {
  size_t i = 0;
  while (i < pending_.size()) {
    const char c = pending_[i];
    if (c == '"') {
      state_ = State::ResponseEnded;
      pending_.clear();
      return;
    }
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 >= pending_.size()) break;  // the escape continues in the next piece
    const char e = pending_[i + 1];
    if (e != 'u') {
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        default: out += e; break;  // \" \\ \/
      }
      i += 2;
      continue;
    }
    const int unit = unicode_escape(pending_, i);
    if (unit == -2) break;
    if (unit < 0) {  // not an escape the grammar allows: pass it through as text
      out += pending_.substr(i, 2);
      i += 2;
      continue;
    }
    uint32_t cp = static_cast<uint32_t>(unit);
    size_t used = 6;
    if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate: its pair follows
      const int low = i + 6 < pending_.size() && pending_[i + 6] == '\\' ? unicode_escape(pending_, i + 6) : -2;
      if (low == -2 && i + 12 > pending_.size()) break;
      if (low >= 0xDC00 && low < 0xE000) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<uint32_t>(low) - 0xDC00);
        used = 12;
      } else {
        cp = 0xFFFD;
      }
    } else if (cp >= 0xDC00 && cp < 0xE000) {
      cp = 0xFFFD;
    }
    utf8::append_codepoint(out, cp);
    i += used;
  }
  pending_.erase(0, i);
}

ToolReply ToolReplyStream::finish() {
  ToolReply reply;
  switch (state_) {
    case State::Deciding:
    case State::Text: reply.content = std::move(pending_); break;
    case State::Response: break;  // cut inside the string: a partial escape is dropped
    case State::ResponseEnded: break;
    case State::Held: {
      bool parsed = false;
      switch (syntax_) {
        case ToolSyntax::Hermes: parse_hermes(pending_, reply); parsed = true; break;
        case ToolSyntax::Llama3: parsed = parse_llama3(pending_, reply); break;
        case ToolSyntax::Mistral: parsed = parse_mistral(pending_, reply); break;
        case ToolSyntax::Generic: parsed = parse_generic(pending_, reply); break;
      }
      if (!parsed) {
        reply.calls.clear();
        reply.content = std::move(pending_);
      }
      break;
    }
  }
  pending_.clear();
  return reply;
}

ToolReply parse_tool_reply(ToolSyntax syntax, std::string_view text) {
  ToolReplyStream stream(syntax);
  std::string content = stream.push(text);
  ToolReply reply = stream.finish();
  reply.content.insert(0, content);
  return reply;
}

std::string python_style_json(const ordered_json& value) {
  std::string out;
  write_python_json(out, value);
  return out;
}

}  // namespace ember
