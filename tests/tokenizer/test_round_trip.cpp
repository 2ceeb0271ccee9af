// Random text through real vocabularies: encoding never throws, and decoding gives the text back
// (byte-level BPE is lossless on any bytes; SentencePiece with byte fallback on any text).
#include <doctest/doctest.h>

#include <random>

#include "core/gguf/gguf_file.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/utf8.h"
#include "tests/support/fixtures.h"

namespace {

enum class Extra { AnyByte, AnyCodepoint, None };

struct TextKind {
  bool spm_space = true;  // may contain "▁", which SentencePiece cannot tell from a space
  Extra extra = Extra::AnyByte;  // what goes between the sample pieces now and then
};

uint32_t random_codepoint(std::mt19937& rng) {
  for (;;) {
    const uint32_t cp = 1 + rng() % 0x10FFFF;
    if (cp < 0xD800 || cp > 0xDFFF) return cp;
  }
}

std::string random_text(std::mt19937& rng, TextKind kind) {
  static const std::vector<std::string> pieces = {"a", "Hello", " ", "  ", "\n", "\t", "é", "日本", "😀", "'s", "123",
                                                  "<s>", "</s>", "<|endoftext|>", "!!", "\r\n", "\xE2\x96\x81"};
  std::string s;
  const int n = static_cast<int>(rng() % 20);
  const size_t n_pieces = pieces.size() - (kind.spm_space ? 0 : 1);
  for (int i = 0; i < n; ++i) {
    if (kind.extra == Extra::AnyByte && rng() % 8 == 0) {
      s += static_cast<char>(rng() % 256);  // valid UTF-8 or not
    } else if (kind.extra == Extra::AnyCodepoint && rng() % 8 == 0) {
      ember::utf8::append_codepoint(s, random_codepoint(rng));
    } else {
      s += pieces[rng() % n_pieces];
    }
  }
  return s;
}

void round_trip(const std::string& vocab, TextKind kind) {
  auto path = ember::test::fixture("vocab/ggml-vocab-" + vocab + ".gguf");
  if (!path) return;
  const auto file = ember::gguf::GgufFile::open(path->string());
  const auto tok = ember::Tokenizer::from_gguf(file.metadata());
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    const std::string text = random_text(rng, kind);
    const auto ids = tok.encode(text, false, false);
    CHECK_MESSAGE(tok.decode(ids) == text, "text '" << text << "'");
    const auto with_specials = tok.encode(text, true, true);  // must not throw either
    for (int32_t id : with_specials) CHECK((id >= 0 && id < tok.n_vocab()));
  }
}

}  // namespace

TEST_CASE("round trip gpt-2" * ember::test::needs_fixtures) { round_trip("gpt-2", {}); }
// Falcon's vocabulary lacks a few control bytes (03, 04, 05, 0B, ...): they are dropped, as in llama.cpp.
TEST_CASE("round trip falcon" * ember::test::needs_fixtures) { round_trip("falcon", {.extra = Extra::None}); }
// SentencePiece escapes spaces before splitting into characters, so an invalid byte before a space
// swallows part of the "▁" (as in llama.cpp): only valid UTF-8 round-trips.
TEST_CASE("round trip llama-spm" * ember::test::needs_fixtures) {
  round_trip("llama-spm", {.spm_space = false, .extra = Extra::AnyCodepoint});
}
// This vocabulary has no alphabet tokens for the bytes that never occur in UTF-8 (C0, C1, F5-FF):
// user-defined tokens with those letters' texts stand in, and they detokenize as the letters (as in
// llama.cpp). Valid UTF-8 round-trips.
TEST_CASE("round trip deepseek-llm" * ember::test::needs_fixtures) {
  round_trip("deepseek-llm", {.extra = Extra::AnyCodepoint});
}
