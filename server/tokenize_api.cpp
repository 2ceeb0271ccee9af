#include "server/tokenize_api.h"

#include "server/openai_api.h"

namespace ember::server {
namespace {

using nlohmann::json;

bool optional_bool(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return false;
  if (!it->is_boolean()) throw BadRequest(std::string("'") + name + "' must be a boolean", name);
  return it->get<bool>();
}

}  // namespace

json parse_tokens_body(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw BadRequest("the request body is not valid JSON");
  if (!j.is_object()) throw BadRequest("the request body must be a JSON object");
  return j;
}

TokenizeRequest parse_tokenize_request(const std::string& body, size_t max_content_bytes) {
  return tokenize_request_from(parse_tokens_body(body), max_content_bytes);
}

TokenizeRequest tokenize_request_from(const json& j, size_t max_content_bytes) {
  TokenizeRequest r;
  auto it = j.find("content");
  if (it == j.end() || it->is_null()) throw BadRequest("'content' is required", "content");
  if (!it->is_string()) throw BadRequest("'content' must be a string", "content");
  r.content = it->get<std::string>();
  if (r.content.size() > max_content_bytes) {
    throw BadRequest("'content' is longer than " + std::to_string(max_content_bytes) + " bytes", "content");
  }
  r.add_special = optional_bool(j, "add_special");
  r.parse_special = optional_bool(j, "parse_special");
  r.with_pieces = optional_bool(j, "with_pieces");
  return r;
}

json tokenize_response(const Tokenizer& tokenizer, const TokenizeRequest& request) {
  const std::vector<int32_t> ids = tokenizer.encode(request.content, request.add_special, request.parse_special);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (request.with_pieces) {
      // A piece may be part of a UTF-8 sequence; the body is dumped with invalid bytes replaced.
      tokens.push_back(json{{"id", id}, {"piece", tokenizer.token_to_piece(id, /*render_special=*/true)}});
    } else {
      tokens.push_back(id);
    }
  }
  return json{{"tokens", std::move(tokens)}};
}

std::vector<int32_t> parse_detokenize_request(const std::string& body, int32_t n_vocab, size_t max_tokens) {
  return detokenize_request_from(parse_tokens_body(body), n_vocab, max_tokens);
}

std::vector<int32_t> detokenize_request_from(const json& j, int32_t n_vocab, size_t max_tokens) {
  auto it = j.find("tokens");
  if (it == j.end() || it->is_null()) throw BadRequest("'tokens' is required", "tokens");
  if (!it->is_array()) throw BadRequest("'tokens' must be an array of token ids", "tokens");
  if (it->size() > max_tokens) {
    throw BadRequest("'tokens' has more than " + std::to_string(max_tokens) + " entries", "tokens");
  }
  std::vector<int32_t> ids;
  ids.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    const std::string where = "tokens[" + std::to_string(i) + "]";
    if (!v.is_number_integer()) throw BadRequest(where + " must be an integer token id", "tokens");
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() < static_cast<uint64_t>(n_vocab)
                                                 : v.get<int64_t>() >= 0 && v.get<int64_t>() < n_vocab;
    if (!in_range) {
      throw BadRequest(where + " = " + v.dump() + " is not a token id (the vocabulary has " +
                           std::to_string(n_vocab) + " tokens)",
                       "tokens");
    }
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

json detokenize_response(const Tokenizer& tokenizer, const std::vector<int32_t>& tokens) {
  return json{{"content", tokenizer.decode(tokens, /*render_special=*/false)}};
}

}  // namespace ember::server
