// The schema compiler: one GBNF rule per schema node (so recursion through $ref is a rule
// reference), over a fixed set of JSON primitive rules. Keywords are checked against the list this
// file implements before anything is compiled, so an unknown keyword is an error, not a no-op.
#include "core/grammar/json_schema.h"

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "core/grammar/gbnf_text.h"
#include "core/grammar/schema_parts.h"
#include "core/grammar/utf8.h"

namespace ember::grammar {
namespace {

using ojson = nlohmann::ordered_json;

// Shared by every compiled schema. The bounds (16 integer digits, 16 fraction digits, 2 exponent
// digits, one newline and 20 indent characters of whitespace) keep a model from looping inside a
// number or whitespace; docs/grammar.md lists them.
constexpr const char* kPrimitives = R"(ws ::= ([ \t] | "\n" [ \t]{0,20})?
char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
xchar ::= [^"\\\x00-\x1F]
string ::= "\"" char* "\""
integer ::= "-"? uinteger
uinteger ::= "0" | [1-9] [0-9]{0,15}
number ::= "-"? unumber
unumber ::= uinteger ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws (member ("," ws member)*)? "}"
member ::= string ws ":" ws value ws
array ::= "[" ws (value ws ("," ws value ws)*)? "]"
)";

constexpr int64_t kIntegerCap = 9999999999999999;  // 16 digits, as `uinteger`
constexpr int kMaxDepth = 64;
constexpr size_t kMaxRules = 20000;
constexpr uint64_t kMaxLength = 10000;

const std::set<std::string> kAnnotations = {"title",    "description", "default", "examples", "$schema",
                                            "$id",      "$comment",    "deprecated", "readOnly", "writeOnly",
                                            "$defs",    "definitions"};
const std::set<std::string> kObjectKeys = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayKeys = {"items", "prefixItems", "minItems", "maxItems", "uniqueItems"};
const std::set<std::string> kStringKeys = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberKeys = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::set<std::string> kCombinators = {"$ref", "const", "enum", "anyOf", "oneOf", "allOf", "type"};

std::string join_alternatives(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " | ") + p;
  return parts.size() > 1 ? "(" + out + ")" : out;
}

std::string escape_pointer(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

bool json_has_type(const ojson& v, const std::string& type) {
  if (type == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (type == "number") return v.is_number();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  return false;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const ojson& root, std::string rule_prefix) : root_(root), prefix_(std::move(rule_prefix)) {}

  std::string compile() {
    const SchemaFragment f = fragment();
    return "root ::= " + f.root + "\n" + f.rules + kPrimitives;
  }

  SchemaFragment fragment() {
    SchemaFragment f;
    f.root = visit(root_, "");
    for (const auto& [name, body] : rules_) f.rules += name + " ::= " + body + "\n";
    return f;
  }

 private:
  [[noreturn]] static void fail(const std::string& ptr, const std::string& keyword, const std::string& why) {
    throw SchemaError(ptr, keyword, why);
  }

  std::string rule(const std::string& body) {
    if (rules_.size() >= kMaxRules) fail("", "", "the schema needs more than " + std::to_string(kMaxRules) + " rules");
    rules_.emplace_back(prefix_ + "s" + std::to_string(rules_.size()), body);
    return rules_.back().first;
  }

  std::string visit(const ojson& s, const std::string& ptr) {
    if (++depth_ > kMaxDepth) fail(ptr, "", "schemas nested deeper than " + std::to_string(kMaxDepth));
    std::string out = visit_inner(s, ptr);
    --depth_;
    return out;
  }

  std::string visit_inner(const ojson& s, const std::string& ptr) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return "value";
      fail(ptr, "false", "the schema 'false' admits no value");
    }
    if (!s.is_object()) fail(ptr, "", "a schema must be an object or a boolean");
    std::set<std::string> constraints;
    for (const auto& [key, value] : s.items()) {
      if (kAnnotations.count(key)) continue;
      if (!kCombinators.count(key) && !kObjectKeys.count(key) && !kArrayKeys.count(key) && !kStringKeys.count(key) &&
          !kNumberKeys.count(key)) {
        fail(ptr, key, "unsupported keyword");
      }
      constraints.insert(key);
    }
    auto only = [&](const std::string& keyword, std::set<std::string> allowed) {
      allowed.insert(keyword);
      for (const auto& k : constraints) {
        if (!allowed.count(k)) fail(ptr, k, "'" + k + "' beside '" + keyword + "' is not supported");
      }
    };
    if (s.contains("$ref")) {
      only("$ref", {});
      return ref(s["$ref"], ptr + "/$ref");
    }
    if (s.contains("const") || s.contains("enum")) {
      const bool is_const = s.contains("const");
      const std::string kw = is_const ? "const" : "enum";
      only(kw, {"type"});
      std::vector<ojson> values;
      if (is_const) {
        values.push_back(s["const"]);
      } else {
        if (!s["enum"].is_array() || s["enum"].empty()) fail(ptr, "enum", "'enum' must be a non-empty array");
        for (const auto& v : s["enum"]) values.push_back(v);
      }
      std::vector<std::string> alts;
      for (const auto& v : values) {
        if (s.contains("type") && !matches_type(v, s["type"], ptr)) continue;
        alts.push_back(gbnf_literal(v.dump()));
      }
      if (alts.empty()) fail(ptr, kw, "no value of '" + kw + "' has the schema's type");
      return join_alternatives(alts);
    }
    for (const char* kw : {"anyOf", "oneOf"}) {
      if (!s.contains(kw)) continue;
      only(kw, {});
      const auto& list = s[kw];
      if (!list.is_array() || list.empty()) fail(ptr, kw, std::string("'") + kw + "' must be a non-empty array");
      std::vector<std::string> alts;
      for (size_t i = 0; i < list.size(); ++i) alts.push_back(visit(list[i], ptr + "/" + kw + "/" + std::to_string(i)));
      return rule(join_alternatives(alts));
    }
    if (s.contains("allOf")) return visit(merge_all_of(s, ptr), ptr);
    if (s.contains("type")) {
      const auto& t = s["type"];
      if (t.is_string()) return typed(s, t.get<std::string>(), ptr);
      if (!t.is_array() || t.empty()) fail(ptr, "type", "'type' must be a string or a non-empty array");
      std::vector<std::string> alts;
      for (const auto& one : t) {
        if (!one.is_string()) fail(ptr, "type", "'type' entries must be strings");
        alts.push_back(typed(s, one.get<std::string>(), ptr));
      }
      return rule(join_alternatives(alts));
    }
    // No type: what the keywords imply (each applies only to its own type, so a value of any
    // other type is valid too - but we generate the implied type only, which is valid).
    std::vector<std::string> implied;
    for (const auto& k : constraints) {
      const char* t = kObjectKeys.count(k) ? "object" : kArrayKeys.count(k) ? "array" : kStringKeys.count(k) ? "string" : "number";
      if (std::find(implied.begin(), implied.end(), t) == implied.end()) implied.emplace_back(t);
    }
    if (implied.empty()) return "value";
    if (implied.size() > 1) fail(ptr, "type", "keywords of several types without 'type'");
    return typed(s, implied[0], ptr);
  }

  bool matches_type(const ojson& v, const ojson& type, const std::string& ptr) {
    if (type.is_string()) return json_has_type(v, type.get<std::string>());
    if (!type.is_array()) fail(ptr, "type", "'type' must be a string or an array");
    for (const auto& t : type) {
      if (t.is_string() && json_has_type(v, t.get<std::string>())) return true;
    }
    return false;
  }

  std::string ref(const ojson& target, const std::string& ptr) {
    if (!target.is_string()) fail(ptr, "$ref", "'$ref' must be a string");
    const std::string r = target.get<std::string>();
    const auto known = refs_.find(r);
    if (known != refs_.end()) return known->second;
    if (r.empty() || r[0] != '#') fail(ptr, "$ref", "only local references ('#/...') are supported, not '" + r + "'");
    const ojson* node = nullptr;
    try {
      node = &root_.at(ojson::json_pointer(r.substr(1)));
    } catch (const std::exception&) {
      fail(ptr, "$ref", "the reference '" + r + "' points nowhere");
    }
    // A chain of bare references that comes back to itself describes no value at all (and would
    // be a rule that only calls itself): refuse it here, naming the reference.
    {
      const ojson* hop = node;
      for (int hops = 0; hop->is_object() && hop->size() == 1 && hop->contains("$ref"); ++hops) {
        const auto& next = (*hop)["$ref"];
        if (!next.is_string() || hops > 64) break;
        if (next.get<std::string>() == r) fail(ptr, "$ref", "the reference '" + r + "' refers back to itself");
        try {
          hop = &root_.at(ojson::json_pointer(next.get<std::string>().substr(1)));
        } catch (const std::exception&) {
          break;  // reported when that reference is compiled
        }
      }
    }
    // Name the rule before compiling its body, so a recursive reference finds it.
    const std::string name = rule("\"\"");
    const size_t index = rules_.size() - 1;
    refs_.emplace(r, name);
    const std::string body = visit(*node, r.substr(1));
    rules_[index].second = body;
    return name;
  }

  ojson merge_all_of(const ojson& s, const std::string& ptr) {
    const auto& list = s["allOf"];
    if (!list.is_array() || list.empty()) fail(ptr, "allOf", "'allOf' must be a non-empty array");
    ojson merged = ojson::object();
    for (const auto& [k, v] : s.items()) {
      if (k != "allOf") merged[k] = v;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string sub_ptr = ptr + "/allOf/" + std::to_string(i);
      const ojson* part = &list[i];
      for (int hops = 0; part->is_object() && part->contains("$ref"); ++hops) {
        const auto& r = (*part)["$ref"];
        if (hops > 16 || !r.is_string() || r.get<std::string>().rfind("#", 0) != 0) {
          fail(sub_ptr, "allOf", "'allOf' parts must be local object schemas");
        }
        try {
          part = &root_.at(ojson::json_pointer(r.get<std::string>().substr(1)));
        } catch (const std::exception&) {
          fail(sub_ptr, "$ref", "the reference points nowhere");
        }
      }
      if (!part->is_object()) fail(sub_ptr, "allOf", "'allOf' parts must be object schemas");
      for (const auto& [k, v] : part->items()) {
        if (kAnnotations.count(k)) continue;
        if (k == "type") {
          if (v != "object") fail(sub_ptr, "allOf", "'allOf' is supported for object schemas only");
          merged["type"] = "object";
        } else if (k == "properties") {
          for (const auto& [name, prop] : v.items()) {
            if (merged["properties"].contains(name)) fail(sub_ptr, "allOf", "'allOf' parts both define '" + name + "'");
            merged["properties"][name] = prop;
          }
        } else if (k == "required") {
          for (const auto& name : v) merged["required"].push_back(name);
        } else {
          fail(sub_ptr, k, "'" + k + "' inside 'allOf' is not supported (only type, properties, required)");
        }
      }
    }
    if (merged.contains("additionalProperties") && merged["additionalProperties"] != true) {
      fail(ptr, "additionalProperties", "'additionalProperties' beside 'allOf' is not supported");
    }
    merged["type"] = "object";
    return merged;
  }

  std::string typed(const ojson& s, const std::string& type, const std::string& ptr) {
    if (type == "object") return object(s, ptr);
    if (type == "array") return array(s, ptr);
    if (type == "string") return string(s, ptr);
    if (type == "integer") return integer(s, ptr);
    if (type == "number") return number(s, ptr);
    if (type == "boolean") return "boolean";
    if (type == "null") return "null";
    fail(ptr, "type", "unknown type '" + type + "'");
  }

  std::string object(const ojson& s, const std::string& ptr) {
    const ojson props = s.value("properties", ojson::object());
    if (!props.is_object()) fail(ptr, "properties", "'properties' must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(ptr, "required", "'required' must be an array");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) fail(ptr, "required", "'required' entries must be strings");
        required.insert(r.get<std::string>());
      }
    }
    std::string extra_value;  // empty: no additional properties
    const ojson ap = s.value("additionalProperties", ojson(true));
    if (ap.is_boolean()) {
      if (ap.get<bool>()) extra_value = "value";
    } else {
      extra_value = visit(ap, ptr + "/additionalProperties");
    }
    struct Prop {
      std::string kv;
      bool required;
    };
    std::vector<Prop> list;
    std::vector<std::string> names;
    for (const auto& [name, sub] : props.items()) {
      const std::string value = visit(sub, ptr + "/properties/" + escape_pointer(name));
      list.push_back({gbnf_literal(ojson(name).dump()) + " ws \":\" ws " + value + " ws", required.count(name) > 0});
      names.push_back(name);
      required.erase(name);
    }
    for (const auto& name : required) {  // required but not described: any value
      if (extra_value.empty()) {
        fail(ptr, "required", "'" + name + "' is required but additionalProperties is false and it has no schema");
      }
      list.push_back({gbnf_literal(ojson(name).dump()) + " ws \":\" ws " + extra_value + " ws", true});
      names.push_back(name);
    }
    // A[i]: properties i.. after something was written (each needs a comma); B[i]: before anything.
    std::string a_next, b_next;
    if (extra_value.empty()) {
      a_next = b_next = "\"\"";
    } else {
      const std::string kvx = "\"\\\"\" " + key_excluding(names) + " \"\\\"\" ws \":\" ws " + extra_value + " ws";
      a_next = rule("(\",\" ws " + kvx + ")*");
      b_next = rule("(" + kvx + " " + a_next + ")?");
    }
    for (size_t i = list.size(); i-- > 0;) {
      const Prop& p = list[i];
      const std::string a = p.required ? "\",\" ws " + p.kv + " " + a_next : "(\",\" ws " + p.kv + ")? " + a_next;
      const std::string b = p.required ? p.kv + " " + a_next : p.kv + " " + a_next + " | " + b_next;
      a_next = rule(a);
      b_next = rule(b);
    }
    return rule("\"{\" ws " + b_next + " \"}\"");
  }

  // The content of a key that is none of `names`, written without escapes (so that "no escapes"
  // makes the comparison exact): a rule per node of the names' trie.
  std::string key_excluding(const std::vector<std::string>& names) {
    std::vector<std::u32string> words;
    for (const auto& n : names) {
      std::u32string w;
      bool plain = true;
      for (size_t pos = 0; pos < n.size();) {
        const auto cp = decode_utf8(n, pos);
        if (!cp || *cp < 0x20 || *cp == '"' || *cp == '\\') {
          plain = false;  // unreachable without escapes: nothing to exclude
          break;
        }
        w += static_cast<char32_t>(*cp);
      }
      if (plain) words.push_back(w);
    }
    return trie_node(words, 0);
  }

  std::string trie_node(const std::vector<std::u32string>& group, size_t depth) {
    bool is_word = false;
    std::map<char32_t, std::vector<std::u32string>> children;
    for (const auto& w : group) {
      if (w.size() == depth) {
        is_word = true;
      } else {
        children[w[depth]].push_back(w);
      }
    }
    std::vector<std::string> alts;
    CharSet taken;
    for (const auto& [c, sub] : children) {
      std::string lit;
      append_gbnf_char(lit, c, false);
      alts.push_back("\"" + lit + "\" " + trie_node(sub, depth + 1));
      taken.add(c, c);
    }
    // Any other character that a key may hold unescaped: not '"', '\\' or a control character.
    CharSet excluded = taken;
    excluded.add(0, 0x1F);
    excluded.add('"', '"');
    excluded.add('\\', '\\');
    const CharSet final_set = excluded.complement();
    if (!final_set.empty()) alts.push_back(gbnf_class(final_set) + " xchar*");
    if (!is_word) alts.push_back("\"\"");
    return rule(join_alternatives(alts));
  }

  std::string array(const ojson& s, const std::string& ptr) {
    if (s.contains("uniqueItems") && s["uniqueItems"] != false) fail(ptr, "uniqueItems", "'uniqueItems' is not supported");
    const uint64_t min = count_keyword(s, "minItems", ptr, 0);
    const bool bounded = s.contains("maxItems");
    const uint64_t max = count_keyword(s, "maxItems", ptr, 0);
    if (bounded && max < min) fail(ptr, "maxItems", "'maxItems' below 'minItems'");
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) fail(ptr, "prefixItems", "'prefixItems' must be an array");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
        prefix.push_back(visit(s["prefixItems"][i], ptr + "/prefixItems/" + std::to_string(i)));
      }
    }
    std::string item;  // empty: no items beyond the prefix
    const ojson items = s.value("items", ojson(true));
    if (!(items.is_boolean() && !items.get<bool>())) item = visit(items, ptr + "/items");
    const uint64_t k = prefix.size();
    if (item.empty() && min > k) fail(ptr, "minItems", "'minItems' above the items 'prefixItems' allows");
    const uint64_t limit = item.empty() ? k : bounded ? max : UINT64_MAX;
    const uint64_t top = std::min<uint64_t>(limit, bounded ? max : limit);
    // tail: after j items; the items after the prefix as one bounded repetition.
    std::string tail;
    if (!item.empty() && top > k) {
      const uint64_t rep_min = min > k ? min - k : 0;
      std::string rep = "(\",\" ws " + item + " ws)";
      if (top == UINT64_MAX) {
        rep += "{" + std::to_string(rep_min) + ",}";
      } else {
        rep += "{" + std::to_string(rep_min) + "," + std::to_string(top - k) + "}";
      }
      tail = rule(rep);
    } else {
      tail = "\"\"";
    }
    for (uint64_t j = std::min<uint64_t>(k, top); j-- > 1;) {
      const std::string step = "\",\" ws " + prefix[j] + " ws " + tail;
      tail = rule(j >= min ? step + " | \"\"" : step);
    }
    // The first item: from the prefix, or the item schema when there is no prefix.
    std::string body;
    if (top == 0) {
      body = "\"\"";
    } else if (k > 0) {
      body = prefix[0] + " ws " + tail;
    } else {
      // No prefix: item (, item){min-1, top-1}.
      const uint64_t rest_min = min > 0 ? min - 1 : 0;
      std::string rest = "(\",\" ws " + item + " ws)";
      rest += top == UINT64_MAX ? "{" + std::to_string(rest_min) + ",}"
                                : "{" + std::to_string(rest_min) + "," + std::to_string(top - 1) + "}";
      body = item + " ws " + rule(rest);
    }
    if (top > 0 && min == 0) body = "(" + body + ")?";
    return rule("\"[\" ws " + body + " \"]\"");
  }

  uint64_t count_keyword(const ojson& s, const char* kw, const std::string& ptr, uint64_t fallback) {
    if (!s.contains(kw)) return fallback;
    const auto& v = s[kw];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      fail(ptr, kw, std::string("'") + kw + "' must be a non-negative integer");
    }
    const uint64_t n = v.get<uint64_t>();
    if (n > kMaxLength) fail(ptr, kw, std::string("'") + kw + "' above " + std::to_string(kMaxLength) + " is not supported");
    return n;
  }

  std::string string(const ojson& s, const std::string& ptr) {
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern")) {
      if (has_len || s.contains("format")) {
        fail(ptr, "pattern", "'pattern' together with 'minLength'/'maxLength'/'format' is not supported");
      }
      if (!s["pattern"].is_string()) fail(ptr, "pattern", "'pattern' must be a string");
      return rule("\"\\\"\" " + detail::pattern_to_gbnf(s["pattern"].get<std::string>(), ptr) + " \"\\\"\"");
    }
    if (s.contains("format")) {
      if (has_len) fail(ptr, "format", "'format' together with 'minLength'/'maxLength' is not supported");
      const auto& f = s["format"];
      if (!f.is_string()) fail(ptr, "format", "'format' must be a string");
      const std::string date = R"([0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]))";
      const std::string time =
          R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+\-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))";
      std::string body;
      const std::string name = f.get<std::string>();
      if (name == "date") body = date;
      else if (name == "time") body = time;
      else if (name == "date-time") body = date + " \"T\" " + time;
      else if (name == "uuid") body = R"([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})";
      else fail(ptr, "format", "the format '" + name + "' is not supported (date, time, date-time, uuid are)");
      return rule("\"\\\"\" " + body + " \"\\\"\"");
    }
    if (has_len) {
      const uint64_t min = count_keyword(s, "minLength", ptr, 0);
      const bool bounded = s.contains("maxLength");
      const uint64_t max = count_keyword(s, "maxLength", ptr, 0);
      if (bounded && max < min) fail(ptr, "maxLength", "'maxLength' below 'minLength'");
      const std::string rep = bounded ? "{" + std::to_string(min) + "," + std::to_string(max) + "}"
                                      : "{" + std::to_string(min) + ",}";
      return rule("\"\\\"\" char" + rep + " \"\\\"\"");
    }
    return "string";
  }

  // An integer bound from minimum/maximum/exclusive*, rounded inward to an integer; nullopt-like
  // `present` false when absent.
  int64_t bound(const ojson& s, const char* kw, const std::string& ptr, bool lower, bool exclusive, bool& present) {
    present = s.contains(kw);
    if (!present) return 0;
    const auto& v = s[kw];
    if (!v.is_number()) fail(ptr, kw, std::string("'") + kw + "' must be a number");
    const double d = v.get<double>();
    double r = lower ? (exclusive ? std::floor(d) + 1 : std::ceil(d)) : (exclusive ? std::ceil(d) - 1 : std::floor(d));
    if (v.is_number_integer()) {
      int64_t i = v.get<int64_t>();
      if (exclusive) i += lower ? 1 : -1;
      r = static_cast<double>(i);
      if (i >= -kIntegerCap && i <= kIntegerCap) return i;
    }
    // Clamped in double, returned as the exact cap: kIntegerCap rounds to 1e16 as a double, one
    // digit too many if it were cast back.
    const double cap = static_cast<double>(kIntegerCap);
    if (r >= cap) return kIntegerCap;
    if (r <= -cap) return -kIntegerCap;
    return static_cast<int64_t>(r);
  }

  std::string integer(const ojson& s, const std::string& ptr) {
    bool has_min, has_xmin, has_max, has_xmax;
    int64_t lo = bound(s, "minimum", ptr, true, false, has_min);
    const int64_t xlo = bound(s, "exclusiveMinimum", ptr, true, true, has_xmin);
    int64_t hi = bound(s, "maximum", ptr, false, false, has_max);
    const int64_t xhi = bound(s, "exclusiveMaximum", ptr, false, true, has_xmax);
    if (!has_min && !has_xmin && !has_max && !has_xmax) return "integer";
    lo = has_min ? (has_xmin ? std::max(lo, xlo) : lo) : (has_xmin ? xlo : -kIntegerCap);
    hi = has_max ? (has_xmax ? std::min(hi, xhi) : hi) : (has_xmax ? xhi : kIntegerCap);
    if (lo > hi) fail(ptr, has_min ? "minimum" : "exclusiveMinimum", "the integer bounds admit no value");
    return rule(detail::int_range_to_gbnf(lo, hi));
  }

  std::string number(const ojson& s, const std::string& ptr) {
    for (const char* kw : {"maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(kw)) fail(ptr, kw, std::string("'") + kw + "' on a non-integer number is not supported");
    }
    if (s.contains("minimum")) {
      const auto& m = s["minimum"];
      if (!m.is_number() || m.get<double>() != 0.0) {
        fail(ptr, "minimum", "'minimum' on a non-integer number is supported for 0 only");
      }
      return "unumber";
    }
    return "number";
  }

  const ojson& root_;
  const std::string prefix_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> refs_;
  int depth_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) { return SchemaCompiler(schema, "").compile(); }

SchemaFragment json_schema_fragment(const nlohmann::ordered_json& schema, std::string_view rule_prefix) {
  for (char c : rule_prefix) {
    const bool name_char = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!name_char) throw std::invalid_argument("json_schema_fragment: a rule prefix of letters, digits and '-'");
  }
  return SchemaCompiler(schema, std::string(rule_prefix)).fragment();
}

std::string json_primitive_rules() { return kPrimitives; }

std::string json_schema_to_gbnf(const nlohmann::json& schema) {
  return json_schema_to_gbnf(nlohmann::ordered_json::parse(schema.dump()));
}

std::string json_schema_to_gbnf(std::string_view schema_text) {
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(schema_text);
  } catch (const nlohmann::json::parse_error& e) {
    throw SchemaError("", "", std::string("the schema is not JSON: ") + e.what());
  }
  return json_schema_to_gbnf(schema);
}

std::string json_object_gbnf() { return std::string("root ::= object\n") + kPrimitives; }
std::string json_value_gbnf() { return std::string("root ::= value\n") + kPrimitives; }

}  // namespace ember::grammar
