#pragma once
// GPT-2's byte-level alphabet: every byte is shown as a printable codepoint so that byte-level BPE
// vocabularies can store arbitrary bytes as text ("Ġ" is the space byte).
#include <string>
#include <string_view>

namespace ember {

// The UTF-8 text of the codepoint that stands for `byte`.
std::string_view byte_to_unicode(unsigned char byte);

// Appends the bytes that a byte-level token text stands for; codepoints outside the alphabet are
// appended unchanged (their UTF-8).
void append_unicode_as_bytes(std::string& out, std::string_view token_text);

// Appends `raw` with every byte replaced by its alphabet codepoint.
void append_bytes_as_unicode(std::string& out, std::string_view raw);

}  // namespace ember
