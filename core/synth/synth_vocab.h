#pragma once
// A SentencePiece-style ("llama") vocabulary for synthetic models: <unk>, <s>, </s>, the 256 byte
// tokens, then pieces learned by byte-pair merges over built-in English words and syllable-made
// pseudo-words, scored by merge rank. Each learned piece is the concatenation of two earlier pieces
// and the scores follow the merge order, so llama.cpp's SPM tokenizer (which only reaches a piece
// through pairwise merges, best score first) replays the merges and splits English text into real
// multi-letter pieces. Deterministic: depends only on the requested size.
#include <cstdint>
#include <string>
#include <vector>

namespace ember::synth {

// llama.cpp's token types.
enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct Vocabulary {
  std::vector<std::string> tokens;  // UTF-8; "▁" (U+2581) stands for a space, as in SentencePiece
  std::vector<float> scores;
  std::vector<int32_t> types;       // TokenType values
  int32_t unk_id = 0;
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
};

constexpr int32_t kMinSynthVocab = 512;

// Builds a vocabulary of exactly n_vocab tokens; throws std::invalid_argument below kMinSynthVocab.
Vocabulary build_vocabulary(int32_t n_vocab);

}  // namespace ember::synth
