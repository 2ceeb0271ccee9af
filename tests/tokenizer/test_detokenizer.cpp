// The streaming detokenizer never emits a partial UTF-8 sequence, and adds up to decode().
#include <doctest/doctest.h>

#include <random>

#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/utf8.h"
#include "tests/tokenizer/metadata_builder.h"

using ember::IncrementalDetokenizer;
using ember::Tokenizer;
using namespace ember::test;

namespace {

bool valid_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 0;
    if (ember::utf8::decode_at(s, pos, len) == 0xFFFFFFFF) return false;
    pos += len;
  }
  return true;
}

Tokenizer small_tokenizer() {
  return Tokenizer::from_gguf(spm_metadata(small_spm_vocab({{"▁", -1}, {"a", -2}, {"▁a", -3}, {"é", -4}})));
}

int32_t byte_token(unsigned char b) { return 3 + b; }  // small_spm_vocab puts <0x00> at id 3

// Streams `ids`, checking every chunk is valid UTF-8; returns the concatenation.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  IncrementalDetokenizer detok(tok);
  std::string all;
  for (int32_t id : ids) {
    const std::string chunk = detok.push(id);
    CHECK_MESSAGE(valid_utf8(chunk), "chunk after id " << id << " is not valid UTF-8");
    all += chunk;
  }
  const std::string rest = detok.flush();
  CHECK(valid_utf8(rest));
  return all + rest;
}

}  // namespace

TEST_CASE("an emoji split over four byte tokens comes out whole, once") {
  const auto tok = small_tokenizer();
  const auto ids = tok.encode("a😀a", false, false);
  REQUIRE(ids.size() == 6);
  IncrementalDetokenizer detok(tok);
  CHECK(detok.push(ids[0]) == "a");  // "▁a" with the space prefix dropped
  CHECK(detok.push(ids[1]).empty());
  CHECK(detok.push(ids[2]).empty());
  CHECK(detok.push(ids[3]).empty());
  CHECK(detok.push(ids[4]) == "😀");
  CHECK(detok.push(ids[5]) == "a");
  CHECK(detok.flush().empty());
  CHECK(stream(tok, ids) == tok.decode(ids));
  CHECK(tok.decode(ids) == "a😀a");
}

TEST_CASE("the stream equals decode for text mixing pieces and byte tokens") {
  const auto tok = small_tokenizer();
  for (const char* text : {"a a é a", "日本語 a", " a  😀😀 é\n", "é😀a"}) {
    const auto ids = tok.encode(text, true, false);
    CHECK(stream(tok, ids) == tok.decode(ids));
  }
}

TEST_CASE("incomplete or invalid bytes become U+FFFD, never raw") {
  const auto tok = small_tokenizer();
  IncrementalDetokenizer detok(tok);
  CHECK(detok.push(byte_token(0xFF)) == "\xEF\xBF\xBD");  // can never start a sequence
  CHECK(detok.push(byte_token(0xE2)).empty());
  CHECK(detok.push(*tok.find_token("a")) == "\xEF\xBF\xBD" "a");  // the sequence was cut short
  CHECK(detok.push(byte_token(0xF0)).empty());
  CHECK(detok.push(byte_token(0x9F)).empty());
  CHECK(detok.flush() == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(detok.flush().empty());
}

TEST_CASE("reset starts a new stream (the first token's space prefix is dropped again)") {
  const auto tok = small_tokenizer();
  const int32_t space_a = *tok.find_token("▁a");
  IncrementalDetokenizer detok(tok);
  CHECK(detok.push(space_a) == "a");
  CHECK(detok.push(space_a) == " a");
  CHECK(detok.push(byte_token(0xC3)).empty());
  detok.reset();
  CHECK(detok.push(space_a) == "a");
}

TEST_CASE("random token streams: chunks are valid UTF-8 and add up to decode when it is valid") {
  const auto tok = small_tokenizer();
  std::mt19937 rng(1234);
  // Mostly the bytes of real multi-byte characters, sometimes stray bytes and pieces.
  const std::vector<std::string> texts = {"é", "😀", "日", "a", " a"};
  int compared = 0;
  for (int round = 0; round < 500; ++round) {
    std::vector<int32_t> ids;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      const unsigned r = rng() % 10;
      if (r < 6) {
        for (unsigned char c : texts[rng() % texts.size()]) ids.push_back(byte_token(c));
      } else if (r < 8) {
        ids.push_back(rng() % 2 ? *tok.find_token("▁a") : *tok.find_token("é"));
      } else {
        ids.push_back(byte_token(static_cast<unsigned char>(rng() % 256)));
      }
    }
    const std::string streamed = stream(tok, ids);
    const std::string decoded = tok.decode(ids);
    if (valid_utf8(decoded)) {
      ++compared;
      CHECK(streamed == decoded);
    }
  }
  CHECK(compared > 100);
}

TEST_CASE("render_special shows control tokens in the stream") {
  const auto tok = small_tokenizer();
  IncrementalDetokenizer detok(tok, true);
  CHECK(detok.push(1) == "<s>");
  IncrementalDetokenizer plain(tok);
  CHECK(plain.push(1).empty());
}
