// Byte-level BPE and the pre-tokenizers on small in-memory vocabularies.
#include <doctest/doctest.h>

#include "core/tokenizer/byte_unicode.h"
#include "core/tokenizer/pretokenizer.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/tokenizer/metadata_builder.h"

using ember::Tokenizer;
using namespace ember::test;

namespace {

// The 256 byte-alphabet tokens, then `extra`, with `merges`.
ember::gguf::Metadata bpe_metadata(const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                            const std::string& pre = "gpt-2") {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(ember::byte_to_unicode(static_cast<unsigned char>(b)));
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  ember::gguf::Metadata md;
  md.add("tokenizer.ggml.model", string_value("gpt2"));
  md.add("tokenizer.ggml.pre", string_value(pre));
  md.add("tokenizer.ggml.tokens", string_array(tokens));
  md.add("tokenizer.ggml.merges", string_array(merges));
  return md;
}

std::vector<std::string> split(const std::string& pre, const std::string& text) {
  std::vector<ember::TextSpan> spans;
  ember::PreTokenizer::for_name(pre)->split(text, spans);
  std::vector<std::string> words;
  for (const auto& s : spans) words.push_back(text.substr(s.offset, s.length));
  return words;
}

}  // namespace

TEST_CASE("byte alphabet: printable bytes map to themselves, the rest above U+0100") {
  CHECK(ember::byte_to_unicode('a') == "a");
  CHECK(ember::byte_to_unicode(' ') == "Ġ");
  CHECK(ember::byte_to_unicode('\n') == "Ċ");
  std::string all, back;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string encoded;
  ember::append_bytes_as_unicode(encoded, all);
  ember::append_unicode_as_bytes(back, encoded);
  CHECK(back == all);
}

TEST_CASE("bpe: merges apply lowest rank first") {
  const auto tok = Tokenizer::from_gguf(bpe_metadata({"Ġt", "he", "Ġthe"}, {"Ġ t", "h e", "Ġt he"}));
  CHECK(tok.model_name() == "gpt2");
  CHECK_FALSE(tok.add_bos_by_default());
  CHECK(tok.encode(" the", true, false) == std::vector<int32_t>{258});
  CHECK(tok.encode("the", false, false) == std::vector<int32_t>{'t', 257});
  CHECK(tok.decode(tok.encode(" the the", false, false)) == " the the");
}

TEST_CASE("bpe: a merge the vocabulary lacks falls back to the pieces' bytes") {
  // "h e" is a merge but "he" is not a token.
  const auto tok = Tokenizer::from_gguf(bpe_metadata({"Ġt"}, {"h e"}));
  CHECK(tok.encode("he", false, false) == std::vector<int32_t>{'h', 'e'});
}

TEST_CASE("bpe: arbitrary bytes round-trip") {
  const auto tok = Tokenizer::from_gguf(bpe_metadata({}, {}));
  const std::string text = "caf\xC3\xA9 \xF0\x9F\x98\x80 \xFF\xFE tab\tnl\n";
  CHECK(tok.decode(tok.encode(text, false, false)) == text);
}

TEST_CASE("pre-tokenizer gpt-2") {
  CHECK(split("gpt-2", "Hello world's  test\n") ==
        std::vector<std::string>{"Hello", " world", "'s", " ", " test", "\n"});
  CHECK(split("gpt-2", "x=12345") == std::vector<std::string>{"x", "=", "12345"});
}

TEST_CASE("pre-tokenizer llama3 splits numbers in threes and keeps newlines together") {
  CHECK(split("llama-bpe", "x 12345\n\n y") == std::vector<std::string>{"x", " ", "123", "45", "\n\n", " y"});
  CHECK(split("llama3", "I'M") == std::vector<std::string>{"I", "'M"});
}

TEST_CASE("pre-tokenizer starcoder splits every digit") {
  CHECK(split("starcoder", "a 123") == std::vector<std::string>{"a", " ", "1", "2", "3"});
}

TEST_CASE("pre-tokenizer keeps invalid UTF-8 bytes as their own pieces") {
  CHECK(split("gpt-2", "ab\xFF" "cd") == std::vector<std::string>{"ab", "\xFF", "cd"});
}

TEST_CASE("pre-tokenizer names: all known ones compile, unknown ones throw naming the key") {
  for (const char* name : {"default", "gpt-2", "llama3", "llama-bpe", "falcon", "mpt", "starcoder", "refact",
                           "deepseek-coder", "deepseek-llm", "qwen2", "stablelm2", "dbrx", "smaug-bpe", "olmo",
                           "command-r"}) {
    CHECK_NOTHROW(ember::PreTokenizer::for_name(name));
  }
  const std::string msg = tokenizer_error_of([] { ember::PreTokenizer::for_name("no-such-pre"); });
  CHECK(msg.find("tokenizer.ggml.pre") != std::string::npos);
}

TEST_CASE("bpe: control tokens split only with parse_special, user-defined always") {
  auto md = bpe_metadata({"<|endoftext|>", "<|user|>"}, {});
  std::vector<int64_t> types(258, 1);
  types[256] = 3;
  types[257] = 4;
  md.add("tokenizer.ggml.token_type", int_array(types));
  const auto tok = Tokenizer::from_gguf(md);
  CHECK(tok.encode("a<|endoftext|>", false, true) == std::vector<int32_t>{'a', 256});
  CHECK(tok.encode("a<|endoftext|>", false, false).size() > 2);
  CHECK(tok.encode("a<|user|>", false, false) == std::vector<int32_t>{'a', 257});
  CHECK(tok.is_end_of_generation(256));  // a known end-of-turn text
  CHECK(tok.token_to_piece(256).empty());
  CHECK(tok.token_to_piece(256, true) == "<|endoftext|>");
}
