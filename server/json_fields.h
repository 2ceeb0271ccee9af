#pragma once
// Reading optional request fields the way OpenAI clients send them.
#include <nlohmann/json.hpp>

namespace ember::server {

// The field is there and not null: clients send explicit nulls to mean "the default".
inline bool present(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && !it->is_null();
}

}  // namespace ember::server
