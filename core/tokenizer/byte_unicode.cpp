#include "core/tokenizer/byte_unicode.h"

#include <array>
#include <cstdint>

#include "core/tokenizer/utf8.h"

namespace ember {
namespace {

bool printable_as_itself(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<std::string, 256> text;    // byte -> UTF-8
  std::array<int16_t, 512> byte_of{};   // codepoint (< 512) -> byte, -1 when not in the alphabet
  Alphabet() {
    byte_of.fill(-1);
    unsigned next = 256;  // bytes that are not printable take the codepoints from 256 up, in order
    for (unsigned b = 0; b < 256; ++b) {
      const unsigned cp = printable_as_itself(b) ? b : next++;
      utf8::append_codepoint(text[b], cp);
      byte_of[cp] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet table;
  return table;
}

}  // namespace

std::string_view byte_to_unicode(unsigned char byte) { return alphabet().text[byte]; }

void append_unicode_as_bytes(std::string& out, std::string_view token_text) {
  const Alphabet& a = alphabet();
  size_t pos = 0;
  while (pos < token_text.size()) {
    size_t len = 0;
    const uint32_t cp = utf8::decode_at(token_text, pos, len);
    if (cp < a.byte_of.size() && a.byte_of[cp] >= 0) {
      out += static_cast<char>(a.byte_of[cp]);
    } else {
      out.append(token_text.substr(pos, len));
    }
    pos += len;
  }
}

void append_bytes_as_unicode(std::string& out, std::string_view raw) {
  const Alphabet& a = alphabet();
  for (unsigned char c : raw) out += a.text[c];
}

}  // namespace ember
