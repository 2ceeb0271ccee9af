#pragma once
// Helpers shared by the grammar tests: a byte-level vocabulary (one token per byte, then EOG)
// and "does this grammar match this whole string".
#include <memory>
#include <string>
#include <vector>

#include "core/grammar/grammar.h"
#include "core/grammar/matcher.h"
#include "core/grammar/token_trie.h"

namespace ember::grammar::test {

inline constexpr int32_t kByteEog = 256;

inline std::shared_ptr<const TokenTrie> byte_trie() {
  static const auto trie = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    pieces.emplace_back();  // EOG
    return std::make_shared<const TokenTrie>(pieces, std::vector<int32_t>{kByteEog});
  }();
  return trie;
}

// The whole string is in the grammar's language (fed byte by byte, then checked for accepting).
inline bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g, byte_trie());
  for (char c : text) {
    if (!m.accept(static_cast<unsigned char>(c))) return false;
  }
  return m.accepting();
}

inline bool matches(const std::string& gbnf, const std::string& text) { return matches(Grammar::parse(gbnf), text); }

}  // namespace ember::grammar::test
