#pragma once
// Writing GBNF text from code: literals and classes with the escapes the parser reads back.
#include <cstdio>
#include <string>
#include <string_view>

#include "core/grammar/char_set.h"
#include "core/grammar/utf8.h"

namespace ember::grammar {

inline void append_gbnf_char(std::string& out, uint32_t cp, bool in_class) {
  if (cp == '"' || cp == '\\' || (in_class && (cp == ']' || cp == '[' || cp == '-' || cp == '^'))) {
    out += '\\';
    out += static_cast<char>(cp);
  } else if (cp < 0x20 || cp == 0x7F) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(cp));
    out += buf;
  } else {
    append_utf8(out, cp);
  }
}

// A GBNF string literal matching exactly `bytes` (valid UTF-8 expected; bytes >= 0x80 pass through).
inline std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x80) {
      out += c;
    } else {
      append_gbnf_char(out, b, false);
    }
  }
  out += '"';
  return out;
}

inline std::string gbnf_class(const CharSet& set) {
  std::string out = "[";
  for (const CodeRange& r : set.ranges()) {
    append_gbnf_char(out, r.lo, true);
    if (r.hi != r.lo) {
      out += '-';
      append_gbnf_char(out, r.hi, true);
    }
  }
  out += ']';
  return out;
}

}  // namespace ember::grammar
