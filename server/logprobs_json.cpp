#include "server/logprobs_json.h"

#include <cmath>
#include <string>

namespace ember::server {
namespace {

using nlohmann::json;

// A token's bytes as numbers: its text may be a fragment of a UTF-8 sequence (a byte token), which
// the `token` string can only carry as U+FFFD.
json bytes_of(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(c);
  return out;
}

json chat_entry(const TokenAlternative& t) {
  return json{{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes_of(t.token)}};
}

}  // namespace

json chat_logprobs(std::span<const TokenLogprobs> tokens) {
  json content = json::array();
  for (const TokenLogprobs& t : tokens) {
    json entry = chat_entry(t.chosen);
    json top = json::array();
    for (const TokenAlternative& a : t.top) top.push_back(chat_entry(a));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return json{{"content", std::move(content)}, {"refusal", nullptr}};
}

json completion_logprobs(std::span<const TokenLogprobs> tokens, int64_t first_offset) {
  json out{{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
           {"text_offset", json::array()}};
  int64_t offset = first_offset;
  for (const TokenLogprobs& t : tokens) {
    out["tokens"].push_back(t.chosen.token);
    out["text_offset"].push_back(offset);
    offset += static_cast<int64_t>(t.chosen.token.size());
    if (std::isnan(t.chosen.logprob)) {
      out["token_logprobs"].push_back(nullptr);
      out["top_logprobs"].push_back(nullptr);
      continue;
    }
    out["token_logprobs"].push_back(t.chosen.logprob);
    json top = json::object();
    for (const TokenAlternative& a : t.top) {
      // Two tokens can share a text only if their bytes decode alike; the likelier one is kept.
      if (!top.contains(a.token)) top[a.token] = a.logprob;
    }
    out["top_logprobs"].push_back(std::move(top));
  }
  return out;
}

json joined_completion_logprobs(json first, const json& second) {
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    for (const json& v : second.at(key)) first[key].push_back(v);
  }
  return first;
}

}  // namespace ember::server
