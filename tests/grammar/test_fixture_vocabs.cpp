// Real vocabularies (SentencePiece with byte fallback, byte-level BPE): build the trie from the
// tokenizer and walk a schema's grammar token by token; the text must parse and validate.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "core/gguf/gguf_file.h"
#include "core/grammar/json_schema.h"
#include "core/grammar/matcher.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/grammar/mini_validator.h"
#include "tests/support/fixtures.h"

using namespace ember::grammar;
using json = nlohmann::json;

namespace {

constexpr const char* kSchema = R"({"type":"object","properties":{
  "title":{"type":"string","maxLength":24},"year":{"type":"integer","minimum":1900,"maximum":2100},
  "tags":{"type":"array","items":{"type":"string","pattern":"^[a-z]+$"},"minItems":1,"maxItems":3},
  "rating":{"enum":["good","bad"]},"note":{"type":["string","null"]}},
  "required":["title","year","tags","rating"],"additionalProperties":false})";

// Greedy-ish: a fixed pseudo-random "logit" per token and step, then argmax over the mask (what a
// gibberish model does); after a while, EOG and short tokens are favoured so the document ends.
void walk_vocab(const std::string& relative) {
  const auto path = ember::test::fixture(relative);
  if (!path) return;
  const auto file = ember::gguf::GgufFile::open(path->string());
  const auto tok = ember::Tokenizer::from_gguf(file.metadata());
  const auto trie = TokenTrie::from_tokenizer(tok);
  const auto grammar = Grammar::parse(json_schema_to_gbnf(std::string_view(kSchema)));
  const json schema = json::parse(kSchema);
  std::mt19937 rng(7);
  for (int run = 0; run < 3; ++run) {
    Matcher m(grammar, trie);
    std::vector<float> logits(static_cast<size_t>(tok.n_vocab()));
    std::vector<int32_t> ids;
    for (int step = 0; step < 600 && !m.finished(); ++step) {
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      for (size_t i = 0; i < logits.size(); ++i) {
        float l = u(rng);
        if (step > 60) l -= 0.05f * static_cast<float>(trie->piece(static_cast<int32_t>(i)).size());
        if (step > 60 && trie->is_eog(static_cast<int32_t>(i))) l += 10.0f;
        logits[i] = l;
      }
      m.mask(logits);
      int32_t best = -1;
      for (size_t i = 0; i < logits.size(); ++i) {
        if (!std::isinf(logits[i]) && (best < 0 || logits[i] > logits[static_cast<size_t>(best)])) {
          best = static_cast<int32_t>(i);
        }
      }
      if (best < 0) {
        std::string so_far;
        for (int32_t id : ids) so_far += tok.token_to_piece(id);
        MESSAGE("nothing allowed after '" << so_far << "' accepting=" << m.accepting() << " eog=" << trie->eog().size());
      }
      REQUIRE(best >= 0);
      REQUIRE(m.accept(best));
      if (!trie->is_eog(best)) ids.push_back(best);
    }
    INFO(relative << " run " << run);
    REQUIRE(m.finished());
    std::string text;
    for (int32_t id : ids) text += tok.token_to_piece(id);
    INFO("text: " << text);
    json doc;
    REQUIRE_NOTHROW(doc = json::parse(text));
    CHECK(ember::grammar::test::validate(doc, schema, schema));
  }
}

}  // namespace

TEST_CASE("fixture vocab: stories260K (SentencePiece, 512 tokens)" * ember::test::needs_fixtures) {
  walk_vocab("models/stories260K.gguf");
}

TEST_CASE("fixture vocab: llama-spm (SentencePiece, 32k, byte fallback)" * ember::test::needs_fixtures) {
  walk_vocab("vocab/ggml-vocab-llama-spm.gguf");
}

TEST_CASE("fixture vocab: gpt-2 (byte-level BPE, 50k)" * ember::test::needs_fixtures) {
  walk_vocab("vocab/ggml-vocab-gpt-2.gguf");
}

TEST_CASE("fixture vocab: deepseek-llm (byte-level BPE, 100k)" * ember::test::needs_fixtures) {
  walk_vocab("vocab/ggml-vocab-deepseek-llm.gguf");
}
