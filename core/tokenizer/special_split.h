#pragma once
// Cuts special-token texts out of the input before the tokenizer algorithm sees it.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/tokenizer/vocab.h"

namespace ember {

struct Fragment {
  int32_t token = -1;  // a special token, or -1 for raw text [offset, offset + length)
  size_t offset = 0;
  size_t length = 0;
};

// Splits `text` at every occurrence of a special token's text, longest tokens first. User-defined
// tokens always split; control and unknown tokens only when parse_special (llama.cpp's rule).
void split_special(const Vocab& vocab, std::string_view text, bool parse_special, std::vector<Fragment>& out);

}  // namespace ember
