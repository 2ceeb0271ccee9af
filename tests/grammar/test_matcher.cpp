// The token-level matcher: multi-byte tokens, tokens that split a code point, EOG only when the
// text is complete, the mask agreeing with allowed(), the sampler stage.
#include <doctest/doctest.h>

#include <cmath>

#include "core/grammar/grammar_stage.h"
#include "tests/grammar/grammar_test_util.h"

using namespace ember::grammar;

namespace {

// A small vocabulary with multi-symbol tokens and split code points ("é" = C3 A9, "€" = E2 82 AC).
std::shared_ptr<const TokenTrie> small_vocab() {
  static const auto trie = std::make_shared<const TokenTrie>(
      std::vector<std::string>{"", "{", "}", "\"", "a", "ab", "\":", "{\"a\":", "1", "12", " ", "\xC3", "\xA9",
                               "\xC3\xA9", "\xE2\x82", "\xAC", "b\"}", "x", ""},
      std::vector<int32_t>{0});
  return trie;
}

std::vector<int32_t> allowed_ids(Matcher& m) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < m.trie().n_vocab(); ++id) {
    if (m.allowed(id)) ids.push_back(id);
  }
  return ids;
}

std::vector<int32_t> masked_ids(Matcher& m) {
  std::vector<float> logits(static_cast<size_t>(m.trie().n_vocab()), 0.0f);
  m.mask(logits);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isinf(logits[i])) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

}  // namespace

TEST_CASE("matcher: a token may span several grammar symbols") {
  Matcher m(Grammar::parse(R"(root ::= "{\"a\":" [0-9]+ "}")"), small_vocab());
  CHECK(masked_ids(m) == std::vector<int32_t>{1, 7});  // "{" and "{\"a\":"
  CHECK(m.accept(7));
  CHECK(masked_ids(m) == std::vector<int32_t>{8, 9});
  CHECK(m.accept(9));
  CHECK_FALSE(m.accepting());
  CHECK(m.accept(2));
  CHECK(m.accepting());
  CHECK(masked_ids(m) == std::vector<int32_t>{0});  // only EOG
  CHECK(m.accept(0));
  CHECK(m.finished());
  CHECK(masked_ids(m).empty());
}

TEST_CASE("matcher: tokens that end or start inside a code point") {
  Matcher m(Grammar::parse(R"(root ::= [é€]+ "x")"), small_vocab());
  // C3 alone is a valid prefix of é; A9 alone is not a start; E2 82 is a prefix of €.
  CHECK(masked_ids(m) == std::vector<int32_t>{11, 13, 14});
  CHECK(m.accept(11));
  CHECK(masked_ids(m) == std::vector<int32_t>{12});  // only the continuation byte
  CHECK(m.accept(12));
  CHECK(m.accept(14));
  CHECK_FALSE(m.allowed(12));  // E2 82 A9 is not €
  CHECK(m.accept(15));
  CHECK(m.accept(17));
  CHECK(m.accepting());
}

TEST_CASE("matcher: a class without the lead byte's range prunes the partial sequence") {
  Matcher m(Grammar::parse(R"(root ::= [a-z\u00e0-\u00ff])"), small_vocab());
  CHECK(m.allowed(11));   // C3 -> U+00C0..U+00FF overlaps
  CHECK_FALSE(m.allowed(14));  // E2 82 -> U+2080..U+20BF does not
}

TEST_CASE("matcher: a partial sequence that can only become a surrogate is dead at once") {
  Matcher m(Grammar::parse(R"(root ::= .+)"), ember::grammar::test::byte_trie());
  CHECK(m.accept(0xED));
  CHECK(m.allowed(0x9F));        // ED 9F .. is U+D7C0..U+D7FF
  CHECK_FALSE(m.allowed(0xA0));  // ED A0 .. would be a surrogate
}

TEST_CASE("matcher: EOG only in an accepting state; empty tokens never") {
  Matcher m(Grammar::parse(R"(root ::= "a" "b"?)"), small_vocab());
  CHECK_FALSE(m.allowed(0));
  CHECK_FALSE(m.allowed(18));  // an empty, non-EOG token
  CHECK(m.accept(4));
  CHECK(m.allowed(0));
  CHECK(m.accepting());
  CHECK(m.can_continue());
  CHECK_FALSE(m.accept(3));  // rejected: state unchanged
  CHECK(m.accepting());
  m.reset();
  CHECK_FALSE(m.accepting());
  CHECK(m.accept(5));
  CHECK_FALSE(m.can_continue());
}

TEST_CASE("matcher: mask and allowed() agree, before and after caching") {
  const auto g = Grammar::parse(R"(root ::= "{" ("\"" [a-b]* "\":" [0-9]{1,2} ("," | ""))* "}")");
  const std::string text = "{\"ab\":12,\"\":1}";
  for (int pass = 0; pass < 2; ++pass) {  // the second pass hits the mask cache
    Matcher m(g, ember::grammar::test::byte_trie());
    for (char c : text) {
      const auto allowed = allowed_ids(m);
      CHECK(masked_ids(m) == allowed);
      CHECK(allowed_ids(m) == allowed);  // now answered from the cached mask
      REQUIRE(m.accept(static_cast<unsigned char>(c)));
    }
    CHECK(m.accepting());
  }
}

TEST_CASE("matcher: the automaton compacts under a long generation and keeps its place") {
  MatcherLimits limits;
  limits.automaton.max_states = 64;
  limits.automaton.max_frames = 256;
  Matcher m(Grammar::parse(R"g(root ::= "" | "(" root ")" root)g"), ember::grammar::test::byte_trie(), limits);
  std::string open(300, '(');
  CHECK(m.accept_bytes(open));
  CHECK_FALSE(m.accepting());
  for (int i = 0; i < 300; ++i) REQUIRE(m.accept(')'));
  CHECK(m.accepting());
  CHECK_FALSE(m.allowed(')'));
}

TEST_CASE("grammar stage: filters candidates, ignores prompt tokens, advances on the drawn one") {
  Matcher m(Grammar::parse(R"(root ::= "ab" "}")"), small_vocab());
  GrammarStage stage(m);
  stage.accept(17);  // a prompt token: ignored
  std::vector<ember::TokenLogit> buf;
  for (int32_t id = 0; id < m.trie().n_vocab(); ++id) buf.push_back({id, static_cast<float>(id)});
  ember::CandidateSet set{buf.data(), buf.size(), false};
  stage.apply(set);
  REQUIRE(set.size == 2);  // "a" and "ab"
  CHECK(set.data[0].id == 4);
  CHECK(set.data[1].id == 5);
  stage.accept(5);
  CHECK(m.allowed(2));
  // A drawn token the grammar forbids is an error, not silent acceptance.
  ember::CandidateSet again{buf.data(), 1, false};
  stage.apply(again);
  CHECK_THROWS_AS(stage.accept(4), GrammarError);
  stage.reset();
  CHECK(m.allowed(4));
}
