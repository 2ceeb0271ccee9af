#pragma once
// The in-memory vocabulary both tokenizer algorithms work on, independent of where it came from.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tokenizer/merge_ranks.h"

namespace ember {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

enum class VocabModel { SentencePiece, BytePairEncoding };

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Vocab {
  VocabModel model = VocabModel::SentencePiece;
  std::string pre = "default";  // pre-tokenizer name (BPE only)
  std::vector<std::string> tokens;
  std::vector<float> scores;      // SentencePiece merge priority; empty means all 0
  std::vector<TokenType> types;   // empty means all Normal
  MergeRanks merges;              // BPE only

  int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = true;  // SentencePiece: "▁" before the text
  std::vector<int32_t> end_of_generation;  // eos, eot, eom and known end-of-turn texts

  // Derived by index(): text -> id (the last id wins on duplicates, as in llama.cpp), the
  // SentencePiece byte tokens "<0xNN>", special tokens longest text first, and the rendered pieces.
  std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>> token_to_id;
  std::array<int32_t, 256> byte_token{};
  std::vector<int32_t> specials_longest_first;
  std::vector<std::string> pieces;

  // Fills the derived tables; call once after the fields above are set.
  void index() {
    index_texts();
    index_types();
  }
  void index_texts();  // token_to_id, byte_token
  void index_types();  // specials_longest_first, pieces (depend on types)

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  TokenType type(int32_t id) const { return types.empty() ? TokenType::Normal : types[id]; }
  float score(int32_t id) const { return scores.empty() ? 0.0f : scores[id]; }
  int32_t find(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? -1 : it->second;
  }
};

}  // namespace ember
