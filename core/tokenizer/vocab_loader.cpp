#include "core/tokenizer/vocab_loader.h"

#include <limits>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace ember {
namespace {

constexpr const char* kModel = "tokenizer.ggml.model";
constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kTypes = "tokenizer.ggml.token_type";
constexpr const char* kMerges = "tokenizer.ggml.merges";
constexpr const char* kPre = "tokenizer.ggml.pre";

// Metadata getters throw GgufError naming the key; callers of the tokenizer expect TokenizerError.
template <class F>
auto read(F&& getter) {
  try {
    return getter();
  } catch (const gguf::GgufError& e) {
    throw TokenizerError(e.what());
  }
}

std::string length_mismatch(const char* key, size_t got, size_t tokens) {
  return std::string(key) + " has " + std::to_string(got) + " entries but " + kTokens + " has " +
         std::to_string(tokens);
}

// A token id key: absent or -1 (also as uint32 0xFFFFFFFF, a common "none") leaves `fallback`.
int32_t read_token_id(const gguf::Metadata& md, const char* key, int32_t n_vocab, int32_t fallback) {
  const auto value = read([&] { return md.get_int(key); });
  if (!value || *value == -1 || *value == 0xFFFFFFFFll) return value ? -1 : fallback;
  if (*value < 0 || *value >= n_vocab) {
    throw TokenizerError(std::string(key) + " = " + std::to_string(*value) + " is outside the vocabulary of " +
                         std::to_string(n_vocab) + " tokens");
  }
  return static_cast<int32_t>(*value);
}

bool read_bool(const gguf::Metadata& md, const char* key, bool fallback) {
  return read([&] { return md.get_bool(key); }).value_or(fallback);
}

void load_merges(const gguf::Metadata& md, Vocab& v) {
  const std::vector<std::string>* merges = read([&] { return md.get_string_array(kMerges); });
  if (merges == nullptr) throw TokenizerError(std::string(kMerges) + " is missing (required by the gpt2 tokenizer)");
  v.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string& m = (*merges)[i];
    // Searching from 1 lets a merge's left part be a lone space, as llama.cpp allows.
    const size_t space = m.find(' ', 1);
    if (m.empty() || space == std::string::npos) {
      throw TokenizerError(std::string(kMerges) + "[" + std::to_string(i) + "] = '" + m +
                           "' is not two parts separated by a space");
    }
    v.merges.add(std::string_view(m).substr(0, space), std::string_view(m).substr(space + 1));
  }
}

// Texts that end a turn in common chat vocabularies; llama.cpp (llama-vocab.cpp, its end-of-generation
// list) makes them control tokens and ends generation on them even when no eot key names them.
// "</s>" is on that list too: Phi-3's GGUF types it user-defined (always split out of text), but
// llama.cpp's added control attribute means it is plain text unless parse_special.
constexpr const char* kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "<|end_of_text|>",
    "</s>",
};

// llama.cpp's exception: in vocabularies with "<|tool_response>" (Gemma 4) "</s>" is neither end
// of generation nor special; it becomes a normal token.
void demote_gemma4_end_of_sentence(Vocab& v) {
  const int32_t s = v.find("</s>");
  if (s < 0 || v.find("<|tool_response>") < 0) return;
  std::erase(v.end_of_generation, s);
  v.types[s] = TokenType::Normal;
}

}  // namespace

Vocab load_vocab(const gguf::Metadata& md) {
  Vocab v;
  const auto model = read([&] { return md.get_string(kModel); });
  if (!model) throw TokenizerError(std::string(kModel) + " is missing");
  if (*model == "llama") {
    v.model = VocabModel::SentencePiece;
  } else if (*model == "gpt2") {
    v.model = VocabModel::BytePairEncoding;
  } else {
    throw TokenizerError(std::string(kModel) + " = '" + *model + "' is not supported (expected 'llama' or 'gpt2')");
  }
  const bool spm = v.model == VocabModel::SentencePiece;

  const std::vector<std::string>* tokens = read([&] { return md.get_string_array(kTokens); });
  if (tokens == nullptr) throw TokenizerError(std::string(kTokens) + " is missing");
  if (tokens->empty()) throw TokenizerError(std::string(kTokens) + " is empty");
  if (tokens->size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw TokenizerError(std::string(kTokens) + " has too many entries");
  }
  v.tokens = *tokens;
  const auto n_vocab = static_cast<int32_t>(v.tokens.size());

  if (const auto scores = read([&] { return md.get_float_array(kScores); })) {
    if (scores->size() != v.tokens.size()) throw TokenizerError(length_mismatch(kScores, scores->size(), v.tokens.size()));
    v.scores.assign(scores->begin(), scores->end());
  }
  if (const auto types = read([&] { return md.get_int_array(kTypes); })) {
    if (types->size() != v.tokens.size()) throw TokenizerError(length_mismatch(kTypes, types->size(), v.tokens.size()));
    v.types.reserve(types->size());
    for (size_t i = 0; i < types->size(); ++i) {
      const int64_t t = (*types)[i];
      if (t < 0 || t > static_cast<int64_t>(TokenType::Byte)) {
        throw TokenizerError(std::string(kTypes) + "[" + std::to_string(i) + "] = " + std::to_string(t) +
                             " is not a token type (0..6)");
      }
      v.types.push_back(static_cast<TokenType>(t));
    }
  }

  if (!spm) {
    load_merges(md, v);
    v.pre = read([&] { return md.get_string(kPre); }).value_or("default");
  }

  // llama.cpp's defaults for SentencePiece vocabularies that omit the ids.
  auto default_id = [&](int32_t id) { return spm && id < n_vocab ? id : -1; };
  v.bos = read_token_id(md, "tokenizer.ggml.bos_token_id", n_vocab, default_id(1));
  v.eos = read_token_id(md, "tokenizer.ggml.eos_token_id", n_vocab, default_id(2));
  v.unk = read_token_id(md, "tokenizer.ggml.unknown_token_id", n_vocab, default_id(0));
  v.eot = read_token_id(md, "tokenizer.ggml.eot_token_id", n_vocab, -1);
  v.eom = read_token_id(md, "tokenizer.ggml.eom_token_id", n_vocab, -1);
  v.add_bos = read_bool(md, "tokenizer.ggml.add_bos_token", spm);
  v.add_eos = read_bool(md, "tokenizer.ggml.add_eos_token", false);
  v.add_space_prefix = read_bool(md, "tokenizer.ggml.add_space_prefix", spm);

  v.index_texts();
  for (const char* text : kEndOfGenerationTexts) {
    const int32_t id = v.find(text);
    if (id < 0) continue;
    if (v.types.empty()) v.types.assign(v.tokens.size(), TokenType::Normal);
    v.types[id] = TokenType::Control;
    v.end_of_generation.push_back(id);
  }
  demote_gemma4_end_of_sentence(v);
  for (int32_t id : {v.eos, v.eot, v.eom}) {
    if (id >= 0) v.end_of_generation.push_back(id);
  }
  v.index_types();
  return v;
}

}  // namespace ember
