#include <doctest/doctest.h>

#include <set>
#include <string>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "core/synth/synth_vocab.h"

using namespace ember::synth;

namespace {
size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}
}  // namespace

TEST_CASE("the vocabulary has the requested size, the specials and the byte tokens") {
  for (int32_t n : {kMinSynthVocab, 1024, 4000}) {
    const Vocabulary v = build_vocabulary(n);
    REQUIRE(v.size() == n);
    CHECK(v.scores.size() == static_cast<size_t>(n));
    CHECK(v.types.size() == static_cast<size_t>(n));
    CHECK(v.tokens[0] == "<unk>");
    CHECK(v.tokens[1] == "<s>");
    CHECK(v.tokens[2] == "</s>");
    CHECK(v.tokens[3] == "<0x00>");
    CHECK(v.tokens[3 + 0x0A] == "<0x0A>");
    CHECK(v.tokens[258] == "<0xFF>");
    CHECK(v.types[258] == static_cast<int32_t>(TokenType::Byte));
    const std::unordered_set<std::string> unique(v.tokens.begin(), v.tokens.end());
    CHECK(unique.size() == v.tokens.size());
    int unused = 0;
    for (int32_t t : v.types) unused += t == static_cast<int32_t>(TokenType::Unused);
    CHECK(unused == 0);
  }
}

TEST_CASE("a 32000-token vocabulary: merges closed, common words whole, no padding") {
  const Vocabulary v = build_vocabulary(32000);
  REQUIRE(v.size() == 32000);
  CHECK(v.types.back() == static_cast<int32_t>(TokenType::Normal));
  std::unordered_map<std::string, float> score;
  for (int32_t i = 0; i < v.size(); ++i)
    if (v.types[static_cast<size_t>(i)] == static_cast<int32_t>(TokenType::Normal))
      score[v.tokens[static_cast<size_t>(i)]] = v.scores[static_cast<size_t>(i)];
  int checked = 0;
  for (const auto& entry : score) {  // no structured binding: clang 14 cannot capture one
    const std::string& piece = entry.first;
    const float s = entry.second;
    if (utf8_length(piece) < 2) continue;
    bool found = false;
    for (size_t cut = 1; cut < piece.size() && !found; ++cut) {
      const auto a = score.find(piece.substr(0, cut)), b = score.find(piece.substr(cut));
      found = a != score.end() && b != score.end() && a->second > s && b->second > s;
    }
    // Single characters carry the lowest scores but are always present, so they never block a merge.
    if (!found)
      for (size_t cut = 1; cut < piece.size() && !found; ++cut)
        found = score.contains(piece.substr(0, cut)) && score.contains(piece.substr(cut));
    CHECK_MESSAGE(found, piece);
    ++checked;
  }
  CHECK(checked > 30000);

  const std::set<std::string> pieces(v.tokens.begin(), v.tokens.end());
  const std::string space = "\xE2\x96\x81";  // SentencePiece's visible space
  for (const std::string& w : {space + "the", space + "and", space + "little", space + "The", space + "people",
                               std::string("ing")})
    CHECK_MESSAGE(pieces.contains(w), w);
}

TEST_CASE("the vocabulary is deterministic and too small a size is refused") {
  CHECK(build_vocabulary(1024).tokens == build_vocabulary(1024).tokens);
  CHECK_THROWS_AS(build_vocabulary(100), std::invalid_argument);
}
