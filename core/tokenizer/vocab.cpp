#include "core/tokenizer/vocab.h"

#include <algorithm>
#include <cstdio>

#include "core/tokenizer/byte_unicode.h"
#include "core/tokenizer/tokenizer.h"

namespace ember {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";       // "▁"
constexpr std::string_view kSpmUnknownPiece = "\xE2\x96\x85";  // "▅", what llama.cpp shows for unk

void append_spm_unescaped(std::string& out, std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    if (text.substr(pos, kSpmSpace.size()) == kSpmSpace) {
      out += ' ';
      pos += kSpmSpace.size();
    } else {
      out += text[pos++];
    }
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xNN>" -> NN, or -1.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

void Vocab::append_piece(std::string& out, int32_t id) const {
  const std::string& text = tokens[id];
  const TokenType t = type(id);
  if (t == TokenType::UserDefined) {
    out += text;
  } else if (model == VocabModel::SentencePiece) {
    switch (t) {
      case TokenType::Normal: append_spm_unescaped(out, text); break;
      case TokenType::Unknown: out += kSpmUnknownPiece; break;
      case TokenType::Byte: out += static_cast<char>(parse_byte_token(text)); break;  // checked by index_types
      default: break;
    }
  } else if (t == TokenType::Normal) {
    append_unicode_as_bytes(out, text);
  }
}

std::string Vocab::piece(int32_t id) const {
  std::string out;
  append_piece(out, id);
  return out;
}

void Vocab::index_texts() {
  text_index.build(tokens);

  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    int32_t id = find(hex);
    if (id < 0) id = find(std::string(1, static_cast<char>(b)));
    byte_token[b] = id;
  }
}

void Vocab::index_types() {
  specials_longest_first.clear();
  for (int32_t id = 0; id < size(); ++id) {
    const TokenType t = type(id);
    if (t == TokenType::Byte && model == VocabModel::SentencePiece && parse_byte_token(tokens[id]) < 0) {
      throw TokenizerError("tokenizer.ggml.tokens[" + std::to_string(id) + "] is a byte token but its text '" +
                           tokens[id] + "' is not <0xNN>");
    }
    if ((t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) && !tokens[id].empty()) {
      specials_longest_first.push_back(id);
    }
  }
  std::stable_sort(specials_longest_first.begin(), specials_longest_first.end(),
                   [&](int32_t a, int32_t b) { return tokens[a].size() > tokens[b].size(); });
}

}  // namespace ember
