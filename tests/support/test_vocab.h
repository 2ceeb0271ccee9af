#pragma once
// A small SentencePiece vocabulary for hand-built test models: the control tokens <unk> <s> </s>,
// the 256 byte tokens, then "▁a0", "▁b0", ... up to n_vocab entries.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/gguf/gguf_writer.h"

namespace ember::test {

inline void add_test_spm_vocab(gguf::GgufWriter& w, int64_t n_vocab) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  for (int i = 0; static_cast<int64_t>(tokens.size()) < n_vocab; ++i) {
    tokens.push_back(std::string("\xE2\x96\x81") + static_cast<char>('a' + i % 26) + std::to_string(i / 26));
    types.push_back(1);
  }
  std::vector<float> scores(tokens.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_f32_array("tokenizer.ggml.scores", scores);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
}

}  // namespace ember::test
