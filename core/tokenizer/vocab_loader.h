#pragma once
// Builds a Vocab from GGUF metadata (tokenizer.ggml.*), validating every key it reads.
#include "core/gguf/gguf_value.h"
#include "core/tokenizer/vocab.h"

namespace ember {

// Throws TokenizerError naming the key when a key is missing, has the wrong type, has a length that
// disagrees with tokenizer.ggml.tokens, or holds an id outside the vocabulary.
Vocab load_vocab(const gguf::Metadata& md);

}  // namespace ember
