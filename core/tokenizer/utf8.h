#pragma once
// The few UTF-8 facts the tokenizers need.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember::utf8 {

// Length of the sequence a byte starts, judged by its high bits only (a stray continuation byte
// counts as 1), as llama.cpp splits text into symbols.
inline size_t sequence_length(unsigned char lead) {
  static constexpr unsigned char kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

void append_codepoint(std::string& out, uint32_t cp);

// Decodes the codepoint at s[pos]; sets `length` to the bytes consumed. Invalid input gives
// 0xFFFFFFFF and length 1.
uint32_t decode_at(std::string_view s, size_t pos, size_t& length);

// Bytes at the end of `s` that are a valid but incomplete sequence (0 when the tail is complete or
// can never become valid).
size_t incomplete_tail(std::string_view s);

// Appends `s` with every byte that is not part of a valid sequence replaced by U+FFFD.
void append_sanitized(std::string& out, std::string_view s);

}  // namespace ember::utf8
