// Model vocabularies against llama.cpp's greedy references: prompt tokens (BOS first) and the text
// llama.cpp detokenized from the generated tokens.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/gguf/gguf_file.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/support/fixtures.h"

namespace {

void check_reference(const std::string& model, const std::string& reference, bool check_text) {
  auto model_path = ember::test::fixture("models/" + model);
  auto ref_path = ember::test::fixture("reference/" + reference);
  if (!model_path || !ref_path) return;
  const auto file = ember::gguf::GgufFile::open(model_path->string());
  const auto tok = ember::Tokenizer::from_gguf(file.metadata());
  std::ifstream in(*ref_path);
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    ++lines;
    const auto j = nlohmann::json::parse(line);
    const std::string prompt = j.at("prompt");
    const auto prompt_tokens = j.at("prompt_tokens").get<std::vector<int32_t>>();
    const auto greedy = j.at("greedy_tokens").get<std::vector<int32_t>>();
    CHECK_MESSAGE(tok.encode(prompt, true, false) == prompt_tokens, "prompt: " << prompt);
    if (check_text) CHECK_MESSAGE(tok.decode(greedy) == j.at("text").get<std::string>(), "prompt: " << prompt);

    // Streaming gives the same text as decode().
    ember::IncrementalDetokenizer detok(tok);
    std::string streamed;
    for (int32_t id : greedy) streamed += detok.push(id);
    streamed += detok.flush();
    CHECK(streamed == tok.decode(greedy));
  }
  CHECK(lines > 0);
}

}  // namespace

TEST_CASE("stories260K vocab matches llama.cpp prompts and text" * ember::test::needs_fixtures) {
  check_reference("stories260K.gguf", "stories260K.greedy.jsonl", true);
}

TEST_CASE("stories260K-v1 vocab is the same" * ember::test::needs_fixtures) {
  check_reference("stories260K-v1.gguf", "stories260K.greedy.jsonl", true);
}

TEST_CASE("llama-2-tiny-random 32000-token vocab matches llama.cpp prompts and text" *
          ember::test::needs_fixtures) {
  check_reference("llama-2-tiny-random.gguf", "llama-2-tiny-random.greedy.jsonl", true);
}

TEST_CASE("stories260K vocab basics" * ember::test::needs_fixtures) {
  auto model_path = ember::test::fixture("models/stories260K.gguf");
  if (!model_path) return;
  const auto file = ember::gguf::GgufFile::open(model_path->string());
  const auto tok = ember::Tokenizer::from_gguf(file.metadata());
  CHECK(tok.n_vocab() == 512);
  CHECK(tok.model_name() == "llama");
  CHECK(tok.bos_id() == 1);
  CHECK(tok.eos_id() == 2);
  CHECK(tok.add_bos_by_default());
  CHECK(tok.is_end_of_generation(2));
  CHECK_FALSE(tok.is_end_of_generation(1));
  CHECK(tok.is_control(1));
  CHECK(tok.token_to_piece(1).empty());
  CHECK(tok.token_to_piece(1, true) == "<s>");
  CHECK(tok.token_to_piece(13) == "\n");  // <0x0A>
  CHECK(tok.find_token("<s>") == 1);
  CHECK_FALSE(tok.find_token("no such token").has_value());
  // parse_special turns "<s>" in the text into BOS; otherwise it is plain text.
  const auto parsed = tok.encode("<s>Once", false, true);
  REQUIRE(!parsed.empty());
  CHECK(parsed.front() == 1);
  CHECK(tok.encode("<s>Once", false, false).front() != 1);
  CHECK_THROWS_AS(tok.token_to_piece(512), ember::TokenizerError);
  CHECK_THROWS_AS(tok.token_to_piece(-1), ember::TokenizerError);
}
