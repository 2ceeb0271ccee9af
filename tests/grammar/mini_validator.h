#pragma once
// A small JSON-schema validator for exactly the subset the compiler supports, so the tests can
// check generated documents independently of the grammar that produced them.
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

namespace ember::grammar::test {

inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline bool validate(const nlohmann::json& v, const nlohmann::json& s, const nlohmann::json& root) {
  using json = nlohmann::json;
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    return validate(v, root.at(json::json_pointer(s["$ref"].get<std::string>().substr(1))), root);
  }
  if (s.contains("const") && v != s["const"]) return false;
  if (s.contains("enum")) {
    bool found = false;
    for (const auto& e : s["enum"]) found = found || e == v;
    if (!found) return false;
  }
  for (const char* kw : {"anyOf", "oneOf"}) {
    if (!s.contains(kw)) continue;
    int hits = 0;
    for (const auto& sub : s[kw]) hits += validate(v, sub, root);
    if (hits == 0 || (std::string(kw) == "oneOf" && hits > 1)) return false;
  }
  if (s.contains("allOf")) {
    for (const auto& sub : s["allOf"]) {
      json relaxed = sub;
      if (!validate(v, relaxed, root)) return false;
    }
  }
  if (s.contains("type")) {
    auto has = [&](const std::string& t) {
      if (t == "integer") return v.is_number_integer();
      if (t == "number") return v.is_number();
      if (t == "string") return v.is_string();
      if (t == "boolean") return v.is_boolean();
      if (t == "null") return v.is_null();
      if (t == "object") return v.is_object();
      if (t == "array") return v.is_array();
      return false;
    };
    bool ok = false;
    if (s["type"].is_string()) ok = has(s["type"]);
    else for (const auto& t : s["type"]) ok = ok || has(t);
    if (!ok) return false;
  }
  if (v.is_object()) {
    if (s.contains("required")) {
      for (const auto& r : s["required"]) {
        if (!v.contains(r.get<std::string>())) return false;
      }
    }
    for (const auto& [k, x] : v.items()) {
      if (s.contains("properties") && s["properties"].contains(k)) {
        if (!validate(x, s["properties"][k], root)) return false;
      } else if (s.contains("additionalProperties") && !validate(x, s["additionalProperties"], root)) {
        return false;
      }
    }
  }
  if (v.is_array()) {
    size_t i = 0;
    if (s.contains("prefixItems")) {
      for (; i < v.size() && i < s["prefixItems"].size(); ++i) {
        if (!validate(v[i], s["prefixItems"][i], root)) return false;
      }
    }
    if (s.contains("items")) {
      for (; i < v.size(); ++i) {
        if (!validate(v[i], s["items"], root)) return false;
      }
    }
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
  }
  if (v.is_string()) {
    const std::string str = v.get<std::string>();
    if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>()) return false;
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>()))) return false;
    if (s.contains("format")) {
      static const std::map<std::string, std::string> formats = {
          {"date", R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$)"},
          {"uuid", R"(^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$)"},
          {"time", R"(^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$)"}};
      const auto it = formats.find(s["format"].get<std::string>());
      if (it != formats.end() && !std::regex_search(str, std::regex(it->second))) return false;
    }
  }
  if (v.is_number()) {
    const double d = v.get<double>();
    if (s.contains("minimum") && d < s["minimum"].get<double>()) return false;
    if (s.contains("maximum") && d > s["maximum"].get<double>()) return false;
    if (s.contains("exclusiveMinimum") && d <= s["exclusiveMinimum"].get<double>()) return false;
    if (s.contains("exclusiveMaximum") && d >= s["exclusiveMaximum"].get<double>()) return false;
  }
  return true;
}

}  // namespace ember::grammar::test
