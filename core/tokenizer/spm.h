#pragma once
// SentencePiece-style tokenization of one raw text fragment (llama.cpp's llm_tokenizer_spm).
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/tokenizer/vocab.h"

namespace ember {

// PRECONDITIONS: `escaped` already has spaces as "▁" (and the space prefix when wanted).
// Repeatedly merges the adjacent pair whose merged text is the highest-scoring token (leftmost on
// ties); what stays unknown falls back to "<0xNN>" byte tokens, else to unk.
void spm_tokenize(const Vocab& vocab, std::string_view escaped, std::vector<int32_t>& out);

}  // namespace ember
