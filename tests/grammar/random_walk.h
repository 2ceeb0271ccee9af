#pragma once
// Random walks through a grammar's token mask (the schema and tool-call tests): whatever the mask
// lets through must be a string of the grammar, so its output must parse and validate.
#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/grammar/matcher.h"
#include "core/grammar/token_trie.h"

namespace ember::grammar::test {

// A byte-level vocabulary plus some multi-byte JSON tokens, so walks exercise tokens spanning
// several grammar symbols.
inline std::shared_ptr<const TokenTrie> walk_vocab() {
  static const auto trie = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 128; ++b) pieces.emplace_back(1, static_cast<char>(b));
    for (const char* t : {"{\"", "\":", "\",\"", "\"}", "true", "false", "null", "12", "-0", "[]", "{}", "e+", "\xC3\xA9",
                          "\xC3", "\xA9", "ab\"", "\": \"", ", "}) {
      pieces.emplace_back(t);
    }
    pieces.emplace_back();  // EOG
    const auto eog = static_cast<int32_t>(pieces.size() - 1);
    return std::make_shared<const TokenTrie>(pieces, std::vector<int32_t>{eog});
  }();
  return trie;
}

// Random allowed tokens; after `patience` steps, closing tokens and EOG are preferred so the walk
// ends. Returns the text, or nullopt when no token was allowed before accepting (a bug).
inline std::optional<std::string> random_walk(Matcher& m, std::mt19937& rng, int patience) {
  std::string out;
  const auto& trie = m.trie();
  for (int step = 0; step < 20000; ++step) {
    std::vector<int32_t> allowed;
    const auto bits = m.allowed_bits();
    for (int32_t id = 0; id < trie.n_vocab(); ++id) {
      if ((bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1) allowed.push_back(id);
    }
    if (allowed.empty()) {
      MESSAGE("no token allowed after: " << out);
      return std::nullopt;
    }
    int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    if (step > patience) {
      for (const char* pref : {"", "\"", "}", "]", "0", ",", "a", ":", "n"}) {
        bool found = false;
        for (int32_t id : allowed) {
          if ((*pref == 0 && trie.is_eog(id)) || (*pref != 0 && trie.piece(id) == pref)) {
            pick = id;
            found = true;
            break;
          }
        }
        if (found) break;
      }
    }
    REQUIRE(m.accept(pick));
    if (m.finished()) return out;
    out += trie.piece(pick);
  }
  MESSAGE("walk did not end: " << out.substr(0, 300));
  return std::nullopt;
}


}  // namespace ember::grammar::test
