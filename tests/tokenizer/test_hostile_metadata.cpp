// Malformed tokenizer metadata must throw TokenizerError naming the key, never crash.
#include <doctest/doctest.h>

#include "core/tokenizer/tokenizer.h"
#include "tests/tokenizer/metadata_builder.h"

using ember::Tokenizer;
using namespace ember::test;

namespace {

const std::vector<std::string> kTokens = {"<unk>", "<s>", "</s>", "▁", "a"};

// A valid SentencePiece metadata set with `key` replaced by `value` (or left out when value is null).
ember::gguf::Metadata spm_with(const std::string& key, const Value* value) {
  std::vector<std::pair<std::string, Value>> entries = {
      {"tokenizer.ggml.model", string_value("llama")},
      {"tokenizer.ggml.tokens", string_array(kTokens)},
      {"tokenizer.ggml.scores", float_array({0, 0, 0, -1, -2})},
      {"tokenizer.ggml.token_type", int_array({2, 3, 3, 1, 1})},
      {"tokenizer.ggml.bos_token_id", uint32_value(1)},
      {"tokenizer.ggml.eos_token_id", uint32_value(2)},
  };
  ember::gguf::Metadata md;
  bool replaced = false;
  for (auto& [k, v] : entries) {
    if (k == key) {
      replaced = true;
      if (value != nullptr) md.add(k, *value);
    } else {
      md.add(k, v);
    }
  }
  if (!replaced && value != nullptr) md.add(key, *value);
  return md;
}

ember::gguf::Metadata bpe_with_merges(const Value& merges) {
  ember::gguf::Metadata md;
  md.add("tokenizer.ggml.model", string_value("gpt2"));
  md.add("tokenizer.ggml.tokens", string_array({"a", "b", "ab"}));
  md.add("tokenizer.ggml.merges", merges);
  return md;
}

void expect_error_naming(const ember::gguf::Metadata& md, const std::string& key) {
  const std::string msg = tokenizer_error_of([&] { (void)Tokenizer::from_gguf(md); });
  CHECK_MESSAGE(!msg.empty(), "no TokenizerError for " << key);
  CHECK_MESSAGE(msg.find(key) != std::string::npos, "message '" << msg << "' does not name " << key);
}

}  // namespace

TEST_CASE("the valid base metadata loads") {
  const auto tok = Tokenizer::from_gguf(spm_with("", nullptr));
  CHECK(tok.n_vocab() == 5);
}

TEST_CASE("hostile: tokens missing") { expect_error_naming(spm_with("tokenizer.ggml.tokens", nullptr), "tokenizer.ggml.tokens"); }

TEST_CASE("hostile: tokens of the wrong element type") {
  const Value v = int_array({1, 2, 3, 4, 5});
  expect_error_naming(spm_with("tokenizer.ggml.tokens", &v), "tokenizer.ggml.tokens");
}

TEST_CASE("hostile: tokens not an array") {
  const Value v = string_value("a");
  expect_error_naming(spm_with("tokenizer.ggml.tokens", &v), "tokenizer.ggml.tokens");
}

TEST_CASE("hostile: tokens empty") {
  const Value v = string_array({});
  expect_error_naming(spm_with("tokenizer.ggml.tokens", &v), "tokenizer.ggml.tokens");
}

TEST_CASE("hostile: scores of the wrong type") {
  const Value v = string_array({"0", "0", "0", "0", "0"});
  expect_error_naming(spm_with("tokenizer.ggml.scores", &v), "tokenizer.ggml.scores");
}

TEST_CASE("hostile: scores of the wrong length") {
  const Value v = float_array({0, 0, 0});
  expect_error_naming(spm_with("tokenizer.ggml.scores", &v), "tokenizer.ggml.scores");
}

TEST_CASE("hostile: token_type of the wrong type") {
  const Value v = float_array({1, 1, 1, 1, 1});
  expect_error_naming(spm_with("tokenizer.ggml.token_type", &v), "tokenizer.ggml.token_type");
}

TEST_CASE("hostile: token_type of the wrong length") {
  const Value v = int_array({1, 1, 1, 1, 1, 1, 1});
  expect_error_naming(spm_with("tokenizer.ggml.token_type", &v), "tokenizer.ggml.token_type");
}

TEST_CASE("hostile: token_type value out of range") {
  const Value v = int_array({2, 3, 3, 1, 99});
  expect_error_naming(spm_with("tokenizer.ggml.token_type", &v), "tokenizer.ggml.token_type");
}

TEST_CASE("hostile: byte token whose text is not <0xNN>") {
  const Value v = int_array({2, 3, 3, 1, 6});
  expect_error_naming(spm_with("tokenizer.ggml.token_type", &v), "tokenizer.ggml.tokens[4]");
}

TEST_CASE("hostile: bos id out of range") {
  const Value v = uint32_value(5);
  expect_error_naming(spm_with("tokenizer.ggml.bos_token_id", &v), "tokenizer.ggml.bos_token_id");
}

TEST_CASE("hostile: eos id out of range") {
  const Value big = uint32_value(1000000);
  expect_error_naming(spm_with("tokenizer.ggml.eos_token_id", &big), "tokenizer.ggml.eos_token_id");
  const Value negative = int32_value(-7);
  expect_error_naming(spm_with("tokenizer.ggml.eos_token_id", &negative), "tokenizer.ggml.eos_token_id");
  const Value wrong_type = string_value("2");
  expect_error_naming(spm_with("tokenizer.ggml.eos_token_id", &wrong_type), "tokenizer.ggml.eos_token_id");
}

TEST_CASE("an id of -1 (0xFFFFFFFF) means none") {
  const Value v = uint32_value(0xFFFFFFFFull);
  const auto tok = Tokenizer::from_gguf(spm_with("tokenizer.ggml.bos_token_id", &v));
  CHECK(tok.bos_id() == -1);
  CHECK(tok.encode("a", true, false).front() != 1);
}

TEST_CASE("hostile: add_bos_token of the wrong type") {
  const Value v = uint32_value(1);
  expect_error_naming(spm_with("tokenizer.ggml.add_bos_token", &v), "tokenizer.ggml.add_bos_token");
}

TEST_CASE("hostile: unknown tokenizer model") {
  const Value v = string_value("bert");
  expect_error_naming(spm_with("tokenizer.ggml.model", &v), "tokenizer.ggml.model");
  expect_error_naming(spm_with("tokenizer.ggml.model", nullptr), "tokenizer.ggml.model");
  const Value wrong_type = uint32_value(1);
  expect_error_naming(spm_with("tokenizer.ggml.model", &wrong_type), "tokenizer.ggml.model");
}

TEST_CASE("hostile: merges of the wrong type") {
  expect_error_naming(bpe_with_merges(int_array({1, 2})), "tokenizer.ggml.merges");
}

TEST_CASE("hostile: malformed merge without a space") {
  expect_error_naming(bpe_with_merges(string_array({"a b", "nospace"})), "tokenizer.ggml.merges[1]");
  expect_error_naming(bpe_with_merges(string_array({""})), "tokenizer.ggml.merges[0]");
}

TEST_CASE("hostile: gpt2 vocabulary without merges") {
  ember::gguf::Metadata md;
  md.add("tokenizer.ggml.model", string_value("gpt2"));
  md.add("tokenizer.ggml.tokens", string_array({"a"}));
  expect_error_naming(md, "tokenizer.ggml.merges");
}

TEST_CASE("hostile: unknown pre-tokenizer") {
  auto md = bpe_with_merges(string_array({"a b"}));
  md.add("tokenizer.ggml.pre", string_value("klingon"));
  expect_error_naming(md, "tokenizer.ggml.pre");
}

TEST_CASE("hostile: ids outside the vocabulary in decode") {
  const auto tok = Tokenizer::from_gguf(spm_with("", nullptr));
  const std::vector<int32_t> ids{3, 99};
  CHECK_THROWS_AS((void)tok.decode(ids), ember::TokenizerError);
  CHECK_FALSE(tok.is_control(99));
  CHECK_FALSE(tok.is_control(-3));
}
