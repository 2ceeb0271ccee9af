#include "core/tokenizer/utf8.h"

namespace ember::utf8 {
namespace {

constexpr uint32_t kInvalid = 0xFFFFFFFF;

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Valid range of the second byte after a lead byte (excludes overlongs, surrogates, > U+10FFFF).
bool second_byte_ok(unsigned char lead, unsigned char second) {
  if (lead == 0xE0) return second >= 0xA0 && second <= 0xBF;
  if (lead == 0xED) return second >= 0x80 && second <= 0x9F;
  if (lead == 0xF0) return second >= 0x90 && second <= 0xBF;
  if (lead == 0xF4) return second >= 0x80 && second <= 0x8F;
  return is_continuation(second);
}

size_t expected_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // continuation byte or never valid as a lead
}

}  // namespace

void append_codepoint(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t decode_at(std::string_view s, size_t pos, size_t& length) {
  length = 1;
  const auto lead = static_cast<unsigned char>(s[pos]);
  const size_t n = expected_length(lead);
  if (n == 0 || pos + n > s.size()) return kInvalid;
  if (n == 1) return lead;
  if (!second_byte_ok(lead, static_cast<unsigned char>(s[pos + 1]))) return kInvalid;
  uint32_t cp = lead & (0xFF >> (n + 1));
  for (size_t i = 1; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[pos + i]);
    if (!is_continuation(c)) return kInvalid;
    cp = (cp << 6) | (c & 0x3F);
  }
  length = n;
  return cp;
}

size_t incomplete_tail(std::string_view s) {
  const size_t look = s.size() < 3 ? s.size() : 3;
  for (size_t back = 1; back <= look; ++back) {
    const size_t pos = s.size() - back;
    const auto c = static_cast<unsigned char>(s[pos]);
    if (is_continuation(c)) continue;
    const size_t n = expected_length(c);
    if (n <= back) return 0;  // complete (or ASCII / invalid lead): nothing to wait for
    if (back >= 2 && !second_byte_ok(c, static_cast<unsigned char>(s[pos + 1]))) return 0;
    return back;
  }
  return 0;
}

void append_sanitized(std::string& out, std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = 0;
    if (decode_at(s, pos, len) == kInvalid) {
      out += "\xEF\xBF\xBD";
    } else {
      out.append(s.substr(pos, len));
    }
    pos += len;
  }
}

}  // namespace ember::utf8
