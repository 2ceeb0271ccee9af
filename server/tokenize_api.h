#pragma once
// POST /tokenize and POST /detokenize (llama.cpp-style local extensions): request parsing and the
// response bodies. No HTTP here. The tokenizer is immutable and thread-safe, so the I/O thread
// answers these without the engine.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace ember::server {

struct TokenizeRequest {
  std::string content;
  bool add_special = false;    // BOS/EOS as the model's metadata says
  bool parse_special = false;  // "<|im_start|>" in the text becomes the special token
  bool with_pieces = false;    // tokens as [{"id","piece"}] instead of ids
};

inline constexpr size_t kMaxDetokenizeTokens = size_t{1} << 20;

// The body as a JSON object; throws BadRequest when it is none. The *_from functions take it, so a
// handler that reads a field first (`model`) parses the body once.
nlohmann::json parse_tokens_body(const std::string& body);
// Throws BadRequest (server/openai_api.h) naming the field.
TokenizeRequest parse_tokenize_request(const std::string& body, size_t max_content_bytes);
TokenizeRequest tokenize_request_from(const nlohmann::json& body, size_t max_content_bytes);
// {"tokens":[ids]} or {"tokens":[{"id","piece"}]}.
nlohmann::json tokenize_response(const Tokenizer& tokenizer, const TokenizeRequest& request);
// {"tokens":[ids]}: every id an integer in [0, n_vocab), at most `max_tokens`. Throws BadRequest
// naming the first bad index.
std::vector<int32_t> parse_detokenize_request(const std::string& body, int32_t n_vocab,
                                              size_t max_tokens = kMaxDetokenizeTokens);
std::vector<int32_t> detokenize_request_from(const nlohmann::json& body, int32_t n_vocab,
                                             size_t max_tokens = kMaxDetokenizeTokens);
// {"content": text}; special tokens are not rendered, as in generated text.
nlohmann::json detokenize_response(const Tokenizer& tokenizer, const std::vector<int32_t>& tokens);

}  // namespace ember::server
