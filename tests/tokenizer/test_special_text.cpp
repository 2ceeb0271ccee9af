// Special-token texts: which ones are tokens in plain text (parse_special=false), and prompts made
// of segments with their own rule (chat template markers special, message content plain).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/support/fixtures.h"
#include "tests/tokenizer/metadata_builder.h"
#include "tests/tokenizer/token_id.h"

using ember::TextSegment;
using ember::Tokenizer;
using namespace ember::test;

namespace {

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// "▁", the letters of "</s>", "a".."d" and the merges up to "▁abcd", plus the user-defined "<|user|>".
Tokenizer small_tokenizer() {
  auto spec = small_spm_vocab({{"▁", -1}, {"<", -3}, {"/", -3}, {"s", -3}, {">", -3}, {"a", -2}, {"b", -2},
                               {"c", -2}, {"d", -2}, {"ab", -1}, {"cd", -1}, {"abcd", -2}, {"▁abcd", -3}});
  spec.tokens.push_back("<|user|>");
  spec.scores.push_back(0);
  spec.types.push_back(4);
  return Tokenizer::from_gguf(spm_metadata(spec));
}

std::optional<Tokenizer> fixture_tokenizer(const std::string& relative) {
  auto path = fixture(relative);
  if (!path) return std::nullopt;
  return Tokenizer::from_gguf(ember::gguf::GgufFile::open(path->string()).metadata());
}

}  // namespace

TEST_CASE("segments: control-token texts are tokens only in parse_special segments") {
  const Tokenizer tok = small_tokenizer();
  const std::vector<TextSegment> content_eos{{"<s>", true}, {"a</s></s>", false}, {"</s>", true}};
  const auto ids = tok.encode_segments(content_eos, false);
  REQUIRE(ids.size() >= 3);
  CHECK(ids.front() == 1);
  CHECK(ids.back() == 2);
  CHECK(std::count(ids.begin(), ids.end(), 2) == 1);  // the content's two "</s>" stayed text
  // The content alone, as plain text, is what sits between the two markers.
  const auto plain = tok.encode("a</s></s>", false, false);
  CHECK(std::vector<int32_t>(ids.begin() + 1, ids.end() - 1) == plain);
}

TEST_CASE("segments: raw text across a segment boundary is one piece") {
  const Tokenizer tok = small_tokenizer();
  // "ab" + "cd" tokenize as "▁abcd", as the joined text does; apart they would be "▁" "ab" "cd".
  const std::vector<TextSegment> seam{{"ab", true}, {"cd", false}};
  CHECK(tok.encode_segments(seam, false) == std::vector<int32_t>{id_of(tok, "▁abcd")});
  CHECK(tok.encode_segments(seam, false) == tok.encode("abcd", false, true));
  // After a special token the space prefix applies to the next raw piece, whichever segment it is in.
  const std::vector<TextSegment> after_special{{"</s>", true}, {"abcd", false}};
  CHECK(tok.encode_segments(after_special, false) == tok.encode("</s>abcd", false, true));
  // Empty segments change nothing.
  const std::vector<TextSegment> with_empty{{"", true}, {"ab", false}, {"", true}, {"cd", false}, {"", false}};
  CHECK(tok.encode_segments(with_empty, false) == tok.encode("abcd", false, true));
}

TEST_CASE("segments: user-defined tokens are tokens in template text, never in content") {
  const Tokenizer tok = small_tokenizer();
  const int32_t user = id_of(tok, "<|user|>");
  // Plain encode() cuts user-defined tokens out even without parse_special (llama.cpp's rule) ...
  CHECK(contains(tok.encode("<|user|>a", false, false), user));
  // ... but a vocabulary may type its turn markers user-defined: in content they stay text.
  const std::vector<TextSegment> content{{"<|user|>a", false}};
  CHECK_FALSE(contains(tok.encode_segments(content, false), user));
  const std::vector<TextSegment> marker{{"<|user|>", true}, {"a<|user|>", false}};
  const auto ids = tok.encode_segments(marker, false);
  CHECK(std::count(ids.begin(), ids.end(), user) == 1);
  CHECK(ids.front() == user);
}

TEST_CASE("segments: add_special and no segments") {
  const Tokenizer tok = small_tokenizer();
  CHECK(tok.encode_segments({}, true) == std::vector<int32_t>{1});
  CHECK(tok.encode_segments({}, false).empty());
  const std::vector<TextSegment> one{{"ab", false}};
  CHECK(tok.encode_segments(one, true) == tok.encode("ab", true, false));
}

TEST_CASE("segments: a real vocabulary keeps </s> in content as text" * ember::test::needs_fixtures) {
  const auto tok = fixture_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  if (!tok) return;
  const std::vector<TextSegment> prompt{{"<s>[INST] ", true}, {"x</s></s></s>", false}, {" [/INST]", true}};
  const auto ids = tok->encode_segments(prompt, false);
  CHECK(std::count(ids.begin(), ids.end(), tok->eos_id()) == 0);
  CHECK(std::count(ids.begin(), ids.end(), tok->bos_id()) == 1);
  // Before the fix the whole prompt went through parse_special=true: one EOS per "</s>".
  const auto old_way = tok->encode("<s>[INST] x</s></s></s> [/INST]", false, true);
  CHECK(std::count(old_way.begin(), old_way.end(), tok->eos_id()) == 3);
}

// llama.cpp (llama-vocab.cpp) adds the control attribute to "</s>" with the other end-of-generation
// texts, so a "</s>" that the GGUF types user-defined (Phi-3) is plain text without parse_special.
TEST_CASE("phi-3: </s> is text without parse_special, as in llama.cpp" * ember::test::needs_fixtures) {
  const auto tok = fixture_tokenizer("vocab/ggml-vocab-phi-3.gguf");
  if (!tok) return;
  const std::string text = "<s> not special </s>";
  CHECK(tok->encode(text, false, false) == std::vector<int32_t>{529, 29879, 29958, 451, 4266, 1533, 29879, 29958});
  const auto parsed = tok->encode(text, false, true);
  REQUIRE(parsed.size() >= 2);
  CHECK(parsed.front() == 1);
  CHECK(parsed.back() == 2);
  CHECK(tok->is_control(2));
  CHECK(tok->is_end_of_generation(2));
  CHECK(tok->token_to_piece(2).empty());
  CHECK(tok->token_to_piece(2, true) == "</s>");
}

TEST_CASE("</s> typed user-defined in a small vocabulary becomes control; Gemma 4's exception") {
  auto spec = small_spm_vocab({{"▁", -1}, {"<", -3}, {"/", -3}, {"s", -3}, {">", -3}});
  spec.types[2] = 4;  // "</s>" user-defined, as in Phi-3's GGUF
  const auto tok = Tokenizer::from_gguf(spm_metadata(spec));
  CHECK(tok.is_control(2));
  CHECK_FALSE(contains(tok.encode("</s>", false, false), 2));
  CHECK(tok.encode("</s>", false, true) == std::vector<int32_t>{2});

  // With "<|tool_response>" in the vocabulary llama.cpp makes "</s>" a normal token instead (EOS is
  // "<eos>" there, as in Gemma).
  auto gemma = small_spm_vocab({{"▁", -1}, {"<", -3}, {"/", -3}, {"s", -3}, {">", -3}});
  gemma.tokens[2] = "<eos>";
  for (const char* text : {"</s>", "<|tool_response>"}) {
    gemma.tokens.push_back(text);
    gemma.scores.push_back(0);
    gemma.types.push_back(3);
  }
  const auto gemma4 = Tokenizer::from_gguf(spm_metadata(gemma));
  const int32_t s = id_of(gemma4, "</s>");
  CHECK_FALSE(gemma4.is_control(s));
  CHECK_FALSE(gemma4.is_end_of_generation(s));
  CHECK(gemma4.is_end_of_generation(2));
  CHECK(gemma4.token_to_piece(s) == "</s>");
}

// Splicing each split fragment into the list in place would be quadratic in the number of
// special-token texts (1 MiB of "<s>a</s>", a request body /tokenize accepts, took ~25 s that way).
TEST_CASE("special-token splitting is linear in the number of special texts") {
  const Tokenizer tok = small_tokenizer();
  constexpr size_t kPairs = (1u << 20) / 8;
  std::string text;
  text.reserve(kPairs * 8);
  for (size_t i = 0; i < kPairs; ++i) text += "<s>a</s>";
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok.encode(text, false, true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(std::count(ids.begin(), ids.end(), 1) == static_cast<std::ptrdiff_t>(kPairs));
  CHECK(std::count(ids.begin(), ids.end(), 2) == static_cast<std::ptrdiff_t>(kPairs));
  CHECK_MESSAGE(seconds < 5.0, "took " << seconds << " s");
}
