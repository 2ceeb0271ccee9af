#pragma once
// The in-memory vocabulary both tokenizer algorithms work on, independent of where it came from.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/merge_ranks.h"
#include "core/tokenizer/token_index.h"

namespace ember {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

enum class VocabModel { SentencePiece, BytePairEncoding };

struct Vocab {
  VocabModel model = VocabModel::SentencePiece;
  std::string pre = "default";  // pre-tokenizer name (BPE only)
  std::vector<std::string> tokens;
  std::vector<float> scores;      // SentencePiece merge priority; empty means all 0
  std::vector<TokenType> types;   // empty means all Normal
  MergeRanks merges;              // BPE only; ranks are positions in tokenizer.ggml.merges

  int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = true;            // SentencePiece: "▁" before the text
  std::vector<int32_t> end_of_generation;  // eos, eot, eom and known end-of-turn texts

  // Derived by index(): text -> id, the SentencePiece byte tokens "<0xNN>" (else the byte itself as
  // a token, else -1), and the special tokens, longest text first.
  TokenIndex text_index;
  std::array<int32_t, 256> byte_token{};
  std::vector<int32_t> specials_longest_first;

  // Fills the derived tables; call after the fields above are set. Throws TokenizerError naming
  // tokenizer.ggml.tokens[i] for a byte token whose text is not "<0xNN>".
  void index() {
    index_texts();
    index_types();
  }
  void index_texts();  // text_index, byte_token
  void index_types();  // specials_longest_first; checks byte tokens

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  TokenType type(int32_t id) const { return types.empty() ? TokenType::Normal : types[id]; }
  float score(int32_t id) const { return scores.empty() ? 0.0f : scores[id]; }
  int32_t find(std::string_view text) const { return text_index.find(tokens, text); }
  // The bytes a token stands for when detokenizing; control and unused tokens give "".
  std::string piece(int32_t id) const;
  void append_piece(std::string& out, int32_t id) const;
};

}  // namespace ember
