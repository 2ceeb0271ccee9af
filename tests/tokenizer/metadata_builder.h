#pragma once
// Builds GGUF metadata in memory for tokenizer tests.
#include <string>
#include <vector>

#include <cstdio>

#include "core/gguf/gguf_value.h"
#include "core/tokenizer/tokenizer.h"

namespace ember::test {

using gguf::Value;
using gguf::ValueType;

inline Value string_value(std::string s) { return Value{ValueType::STRING, ValueType::UINT8, std::move(s)}; }
inline Value bool_value(bool b) { return Value{ValueType::BOOL, ValueType::UINT8, b}; }
inline Value uint32_value(uint64_t v) { return Value{ValueType::UINT32, ValueType::UINT8, v}; }
inline Value int32_value(int64_t v) { return Value{ValueType::INT32, ValueType::UINT8, v}; }
inline Value string_array(std::vector<std::string> v) {
  return Value{ValueType::ARRAY, ValueType::STRING, std::move(v)};
}
inline Value float_array(std::vector<double> v) { return Value{ValueType::ARRAY, ValueType::FLOAT32, std::move(v)}; }
inline Value int_array(std::vector<int64_t> v) { return Value{ValueType::ARRAY, ValueType::INT32, std::move(v)}; }

struct VocabSpec {
  std::vector<std::string> tokens;
  std::vector<double> scores;
  std::vector<int64_t> types;
};

// A small SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then `pieces` (type
// normal) with their scores.
inline VocabSpec small_spm_vocab(const std::vector<std::pair<std::string, double>>& pieces) {
  VocabSpec v;
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    v.tokens.push_back(hex);
    v.types.push_back(6);
  }
  v.scores.assign(v.tokens.size(), 0.0);
  for (const auto& [text, score] : pieces) {
    v.tokens.push_back(text);
    v.scores.push_back(score);
    v.types.push_back(1);
  }
  return v;
}

inline gguf::Metadata spm_metadata(const VocabSpec& v) {
  gguf::Metadata md;
  md.add("tokenizer.ggml.model", string_value("llama"));
  md.add("tokenizer.ggml.tokens", string_array(v.tokens));
  md.add("tokenizer.ggml.scores", float_array(v.scores));
  md.add("tokenizer.ggml.token_type", int_array(v.types));
  md.add("tokenizer.ggml.bos_token_id", uint32_value(1));
  md.add("tokenizer.ggml.eos_token_id", uint32_value(2));
  md.add("tokenizer.ggml.unknown_token_id", uint32_value(0));
  return md;
}

// Runs `f` and returns the TokenizerError message ("" when nothing was thrown).
template <class F>
std::string tokenizer_error_of(F&& f) {
  try {
    f();
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "";
}

}  // namespace ember::test
