#pragma once
// The few UTF-8 facts the grammar engine needs: encoding a code point, decoding one from text,
// and the range of code points a partial sequence can still become.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/tokenizer/utf8.h"

namespace ember::grammar {

// Encoding is the tokenizer's (core/tokenizer/utf8.h); the grammar adds decoding with limits.
inline void append_utf8(std::string& out, uint32_t cp) { utf8::append_codepoint(out, cp); }

// How many continuation bytes follow a lead byte; -1 for a byte that cannot start a sequence
// (a continuation byte, an overlong lead C0/C1, or F5..FF, beyond U+10FFFF).
inline int utf8_continuations(unsigned char lead) {
  if (lead < 0x80) return 0;
  if (lead < 0xC2) return -1;
  if (lead < 0xE0) return 1;
  if (lead < 0xF0) return 2;
  if (lead < 0xF5) return 3;
  return -1;
}

// Decodes the code point at text[pos] and advances pos; nullopt on malformed UTF-8.
inline std::optional<uint32_t> decode_utf8(std::string_view text, size_t& pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const int n = utf8_continuations(lead);
  if (n < 0) return std::nullopt;
  if (n == 0) {
    ++pos;
    return lead;
  }
  if (text.size() - pos <= static_cast<size_t>(n)) return std::nullopt;  // truncated
  uint32_t cp = lead & (0x3F >> n);
  for (int i = 1; i <= n; ++i) {
    const auto c = static_cast<unsigned char>(text[pos + i]);
    if ((c & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (c & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
  pos += n + 1;
  return cp;
}

}  // namespace ember::grammar
