#pragma once
// Byte-level BPE merging of one pre-tokenized word (llama.cpp's llm_tokenizer_bpe).
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/tokenizer/vocab.h"

namespace ember {

// Reusable scratch space, so encoding a prompt does not allocate per word.
struct BpeScratch {
  struct Symbol {
    int32_t prev, next;
    uint32_t offset, n;  // n is 0 once merged into the left neighbour
  };
  struct Bigram {
    int32_t rank, left, right;
    uint32_t left_n, right_n;  // sizes when queued: a pair is stale once either changed
  };
  std::vector<Symbol> symbols;
  std::vector<Bigram> heap;
};

// PRECONDITIONS: `word` is in the byte-level alphabet (see byte_unicode.h).
// Merges the adjacent pair with the lowest merge rank (leftmost on ties) until none applies, then
// maps each symbol to its token, or byte by byte when the symbol is not a token.
void bpe_tokenize_word(const Vocab& vocab, std::string_view word, BpeScratch& scratch,
                       std::vector<int32_t>& out);

}  // namespace ember
