// ember-grammar-bench: the cost of the grammar mask per generated token, on real vocabularies.
//
//   ember-grammar-bench [fixtures-dir]   (default ../shared/fixtures)
//
// For each vocabulary (llama-spm 32k; a 128k one made of the gpt-2 and deepseek-llm pieces, as
// no 128k vocabulary is among the fixtures) and each grammar (json_object; a moderate schema), a
// pseudo-random "model" generates documents through the mask, and every mask() call is timed.
// "cached" runs the matcher as shipped (masks cached by automaton state); "uncached" keeps one
// mask slot, so almost every step walks the trie (the automaton's transition rows stay warm).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/grammar/json_schema.h"
#include "core/grammar/matcher.h"
#include "core/tokenizer/tokenizer.h"

using namespace ember::grammar;

namespace {

constexpr const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0,"maximum":150},
  "email":{"type":"string","pattern":"^[a-z0-9.]+@[a-z]+\\.[a-z]{2,4}$"},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":5},
  "address":{"type":"object","properties":{"street":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},
             "required":["street","zip"],"additionalProperties":false},
  "kind":{"enum":["person","company"]},"score":{"type":"number"}},
  "required":["name","age","tags","address","kind"],"additionalProperties":false})";

struct Vocab {
  std::string name;
  std::vector<std::string> pieces;
  std::vector<int32_t> eog;
};

Vocab load(const std::string& path, const std::string& name) {
  const auto file = ember::gguf::GgufFile::open(path);
  const auto tok = ember::Tokenizer::from_gguf(file.metadata());
  Vocab v{name, {}, {}};
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    v.pieces.push_back(tok.token_to_piece(id));
    if (tok.is_end_of_generation(id)) v.eog.push_back(id);
  }
  return v;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void run(const Vocab& vocab, const std::shared_ptr<const TokenTrie>& trie, const char* grammar_name,
         const std::shared_ptr<const Grammar>& grammar, size_t cache_entries) {
  MatcherLimits limits;
  limits.mask_cache_entries = cache_entries;
  std::vector<double> ms;
  std::vector<float> logits(vocab.pieces.size());
  std::mt19937 rng(42);
  size_t docs = 0;
  const auto t_build = std::chrono::steady_clock::now();
  for (int doc = 0; doc < 6; ++doc) {
    Matcher m(grammar, trie, limits);
    for (int step = 0; step < 200 && !m.finished(); ++step) {
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      for (size_t i = 0; i < logits.size(); ++i) {
        float l = u(rng);
        if (step > 80) l -= 0.05f * static_cast<float>(vocab.pieces[i].size());
        logits[i] = l;
      }
      if (step > 80) {
        for (int32_t e : vocab.eog) logits[static_cast<size_t>(e)] += 10.0f;
      }
      const auto t0 = std::chrono::steady_clock::now();
      m.mask(logits);
      const auto t1 = std::chrono::steady_clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
      if (std::isinf(logits[static_cast<size_t>(best)])) break;
      m.accept(static_cast<int32_t>(best));
    }
    docs += m.finished();
  }
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_build).count();
  std::printf("%-22s %-12s %-9s steps %4zu  median %7.3f ms  p90 %7.3f ms  max %7.3f ms  (%zu/6 docs complete, %.1f s)\n",
              vocab.name.c_str(), grammar_name, cache_entries > 1 ? "cached" : "uncached", ms.size(),
              percentile(ms, 0.5), percentile(ms, 0.9), percentile(ms, 1.0), docs, total_s);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "../shared/fixtures";
  std::vector<Vocab> vocabs;
  vocabs.push_back(load(dir + "/vocab/ggml-vocab-llama-spm.gguf", "llama-spm 32k"));
  {
    // 128k: gpt-2's pieces, then deepseek-llm's that are new, up to 128000; EOG from gpt-2.
    Vocab a = load(dir + "/vocab/ggml-vocab-gpt-2.gguf", "");
    const Vocab b = load(dir + "/vocab/ggml-vocab-deepseek-llm.gguf", "");
    std::set<std::string> seen(a.pieces.begin(), a.pieces.end());
    for (const auto& p : b.pieces) {
      if (a.pieces.size() >= 128000) break;
      if (!p.empty() && seen.insert(p).second) a.pieces.push_back(p);
    }
    a.name = "gpt2+deepseek " + std::to_string(a.pieces.size() / 1000) + "k";
    vocabs.push_back(std::move(a));
  }
  const auto json_object = Grammar::parse(json_object_gbnf());
  const auto schema = Grammar::parse(json_schema_to_gbnf(std::string_view(kSchema)));
  for (const Vocab& v : vocabs) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto trie = std::make_shared<const TokenTrie>(v.pieces, v.eog);
    std::printf("%s: trie of %zu nodes built in %.1f ms\n", v.name.c_str(), trie->nodes().size(),
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    for (size_t cache : {size_t{64}, size_t{1}}) {
      run(v, trie, "json_object", json_object, cache);
      run(v, trie, "schema", schema, cache);
    }
  }
  return 0;
}
