// SentencePiece-style tokenization on small in-memory vocabularies.
#include <doctest/doctest.h>

#include <algorithm>

#include "core/tokenizer/tokenizer.h"
#include "tests/tokenizer/metadata_builder.h"
#include "tests/tokenizer/token_id.h"

using ember::Tokenizer;
using namespace ember::test;

TEST_CASE("spm: the highest-scoring merge wins, whatever its position") {
  // "ab" outscores "▁a", so "▁" + "a" + "b" merges "ab" first and then "▁ab" is not a token.
  const auto tok = Tokenizer::from_gguf(spm_metadata(small_spm_vocab({{"▁", -1}, {"a", -2}, {"b", -2}, {"▁a", -5}, {"ab", -3}})));
  CHECK(tok.encode("ab", false, false) == std::vector<int32_t>{id_of(tok, "▁"), id_of(tok, "ab")});
}

TEST_CASE("spm: ties merge the leftmost pair first") {
  const auto tok = Tokenizer::from_gguf(spm_metadata(small_spm_vocab({{"▁", -1}, {"a", -2}, {"b", -2}, {"▁a", -3}, {"ab", -3}})));
  CHECK(tok.encode("ab", false, false) == std::vector<int32_t>{id_of(tok, "▁a"), id_of(tok, "b")});
}

TEST_CASE("spm: merges continue through intermediate tokens") {
  const auto tok = Tokenizer::from_gguf(
      spm_metadata(small_spm_vocab({{"▁", -1}, {"a", -2}, {"b", -2}, {"▁a", -3}, {"ab", -4}, {"▁ab", -5}})));
  CHECK(tok.encode("ab", false, false) == std::vector<int32_t>{id_of(tok, "▁ab")});
  CHECK(tok.encode("ab ab", false, false) == std::vector<int32_t>{id_of(tok, "▁ab"), id_of(tok, "▁ab")});
}

TEST_CASE("spm: space prefix, BOS and EOS") {
  auto md = spm_metadata(small_spm_vocab({{"▁", -1}, {"a", -2}}));
  md.add("tokenizer.ggml.add_eos_token", bool_value(true));
  const auto tok = Tokenizer::from_gguf(md);
  CHECK(tok.add_bos_by_default());
  CHECK(tok.encode("a", true, false) == std::vector<int32_t>{1, id_of(tok, "▁"), id_of(tok, "a"), 2});
  CHECK(tok.encode("", true, false) == std::vector<int32_t>{1, 2});
  CHECK(tok.encode("", false, false).empty());
}

TEST_CASE("spm: add_space_prefix=false keeps the text as is") {
  auto md = spm_metadata(small_spm_vocab({{"▁", -1}, {"a", -2}}));
  md.add("tokenizer.ggml.add_space_prefix", bool_value(false));
  const auto tok = Tokenizer::from_gguf(md);
  CHECK(tok.encode("a", false, false) == std::vector<int32_t>{id_of(tok, "a")});
  CHECK(tok.decode(tok.encode(" a", false, false)) == " a");
}

TEST_CASE("spm: unknown characters fall back to byte tokens, then to unk") {
  const auto tok = Tokenizer::from_gguf(spm_metadata(small_spm_vocab({{"▁", -1}, {"a", -2}})));
  // U+1F600 is F0 9F 98 80: four byte tokens, ids 3 + byte.
  CHECK(tok.encode("a😀", false, false) ==
        std::vector<int32_t>{id_of(tok, "▁"), id_of(tok, "a"), 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80});
  CHECK(tok.decode(tok.encode("a😀", false, false)) == "a😀");

  VocabSpec no_bytes;
  no_bytes.tokens = {"<unk>", "<s>", "</s>", "▁", "a"};
  no_bytes.scores = {0, 0, 0, -1, -2};
  no_bytes.types = {2, 3, 3, 1, 1};
  const auto plain = Tokenizer::from_gguf(spm_metadata(no_bytes));
  CHECK(plain.encode("aé", false, false) == std::vector<int32_t>{3, 4, 0, 0});  // é is two bytes
}

TEST_CASE("spm: pieces and decode") {
  const auto tok = Tokenizer::from_gguf(spm_metadata(small_spm_vocab({{"▁", -1}, {"a", -2}, {"▁a", -3}})));
  CHECK(tok.token_to_piece(id_of(tok, "▁a")) == " a");
  CHECK(tok.token_to_piece(3 + 0x0A) == "\n");
  CHECK(tok.token_to_piece(0) == "\xE2\x96\x85");  // unk shows as U+2585, as in llama.cpp
  CHECK(tok.token_to_piece(1).empty());
  CHECK(tok.token_to_piece(1, true) == "<s>");
  // The first token's leading space is the space prefix, so decode drops it (llama.cpp does too).
  const std::vector<int32_t> ids{id_of(tok, "▁a"), id_of(tok, "▁a")};
  CHECK(tok.decode(ids) == "a a");
  const std::vector<int32_t> with_bos{1, id_of(tok, "▁a")};
  CHECK(tok.decode(with_bos) == " a");
  CHECK(tok.decode(with_bos, true) == "<s> a");
}

TEST_CASE("spm: special tokens split the text only when parse_special") {
  const auto tok = Tokenizer::from_gguf(spm_metadata(small_spm_vocab({{"▁", -1}, {"a", -2}, {"<", -3}, {">", -3}, {"s", -3}})));
  CHECK(tok.encode("a</s>a", false, true) ==
        std::vector<int32_t>{id_of(tok, "▁"), id_of(tok, "a"), 2, id_of(tok, "▁"), id_of(tok, "a")});
  const auto plain = tok.encode("a</s>a", false, false);
  CHECK(std::find(plain.begin(), plain.end(), 2) == plain.end());
}

TEST_CASE("spm: user-defined tokens are matched whole even without parse_special") {
  auto spec = small_spm_vocab({{"▁", -1}, {"a", -2}});
  spec.tokens.push_back("<|user|>");
  spec.scores.push_back(0);
  spec.types.push_back(4);
  const auto tok = Tokenizer::from_gguf(spm_metadata(spec));
  const int32_t user = id_of(tok, "<|user|>");
  CHECK(tok.encode("<|user|>a", false, false) == std::vector<int32_t>{user, id_of(tok, "▁"), id_of(tok, "a")});
  CHECK(tok.token_to_piece(user) == "<|user|>");
}

TEST_CASE("spm: end-of-generation ids") {
  auto spec = small_spm_vocab({{"▁", -1}});
  spec.tokens.push_back("<|end|>");
  spec.scores.push_back(0);
  spec.types.push_back(4);
  const auto tok = Tokenizer::from_gguf(spm_metadata(spec));
  CHECK(tok.is_end_of_generation(2));
  CHECK(tok.is_end_of_generation(*tok.find_token("<|end|>")));  // a known end-of-turn text
  CHECK_FALSE(tok.is_end_of_generation(1));
  CHECK_FALSE(tok.is_end_of_generation(-1));
}
