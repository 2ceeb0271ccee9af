// llama.cpp's tokenizer test vocabularies: every case of every file must give llama.cpp's ids.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "core/gguf/gguf_file.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/support/fixtures.h"

namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_cases(const std::string& inp) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  size_t pos = 0;
  for (size_t found; (found = inp.find(sep, pos)) != std::string::npos; pos = found + sep.size()) {
    cases.push_back(inp.substr(pos, found - pos));
  }
  return cases;
}

std::vector<std::vector<int32_t>> parse_expected(const std::string& out) {
  std::vector<std::vector<int32_t>> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ids(line);
    std::vector<int32_t> v;
    for (int32_t id; ids >> id;) v.push_back(id);
    lines.push_back(std::move(v));
  }
  return lines;
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    s += ' ';
    s += std::to_string(id);
  }
  return s;
}

void check_vocab(const std::string& name) {
  auto gguf_path = ember::test::fixture("vocab/ggml-vocab-" + name + ".gguf");
  if (!gguf_path) return;
  const auto file = ember::gguf::GgufFile::open(gguf_path->string());
  const auto tok = ember::Tokenizer::from_gguf(file.metadata());
  const auto cases = split_cases(read_all(gguf_path->string() + ".inp"));
  const auto expected = parse_expected(read_all(gguf_path->string() + ".out"));
  REQUIRE(cases.size() == expected.size());
  REQUIRE(!cases.empty());
  int mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto got = tok.encode(cases[i], false, false);
    if (got != expected[i]) {
      ++mismatches;
      FAIL_CHECK("case " << i << " text '" << cases[i] << "'\n  expected:" << ids_text(expected[i])
                             << "\n  got:     " << ids_text(got));
    }
    // Every fixture vocabulary is lossless on these texts: detokenizing gives the text back, and
    // streaming gives the same as decode().
    const std::string decoded = tok.decode(expected[i]);
    CHECK_MESSAGE(decoded == cases[i], "case " << i << " decodes to '" << decoded << "'");
    ember::IncrementalDetokenizer detok(tok);
    std::string streamed;
    for (int32_t id : expected[i]) streamed += detok.push(id);
    streamed += detok.flush();
    CHECK_MESSAGE(streamed == decoded, "case " << i << " streams to '" << streamed << "'");
  }
  MESSAGE(name << ": " << cases.size() - mismatches << "/" << cases.size() << " cases match");
}

}  // namespace

TEST_CASE("vocab fixture llama-spm" * ember::test::needs_fixtures) { check_vocab("llama-spm"); }
TEST_CASE("vocab fixture phi-3" * ember::test::needs_fixtures) { check_vocab("phi-3"); }
TEST_CASE("vocab fixture gpt-2" * ember::test::needs_fixtures) { check_vocab("gpt-2"); }
TEST_CASE("vocab fixture falcon" * ember::test::needs_fixtures) { check_vocab("falcon"); }
TEST_CASE("vocab fixture mpt" * ember::test::needs_fixtures) { check_vocab("mpt"); }
TEST_CASE("vocab fixture starcoder" * ember::test::needs_fixtures) { check_vocab("starcoder"); }
TEST_CASE("vocab fixture deepseek-coder" * ember::test::needs_fixtures) { check_vocab("deepseek-coder"); }
TEST_CASE("vocab fixture deepseek-llm" * ember::test::needs_fixtures) { check_vocab("deepseek-llm"); }
TEST_CASE("vocab fixture refact" * ember::test::needs_fixtures) { check_vocab("refact"); }
