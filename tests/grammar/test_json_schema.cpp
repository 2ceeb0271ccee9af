// The schema compiler: per schema, documents that must and must not match the compiled grammar;
// errors that name the keyword and pointer; bounded cost on hostile schemas; and random walks
// through the mask whose output must parse and validate.
#include <doctest/doctest.h>

#include <chrono>
#include <random>

#include "core/grammar/json_schema.h"
#include "tests/grammar/grammar_test_util.h"
#include "tests/grammar/mini_validator.h"
#include "tests/grammar/random_walk.h"

using namespace ember::grammar;
using ember::grammar::test::matches;
using ember::grammar::test::random_walk;
using ember::grammar::test::walk_vocab;
using json = nlohmann::json;

namespace {

struct SchemaCase {
  const char* schema;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

void check_schema(const SchemaCase& c) {
  const std::string gbnf = json_schema_to_gbnf(std::string_view(c.schema));
  const auto g = Grammar::parse(gbnf);
  const json schema = json::parse(c.schema);
  for (const auto& doc : c.accept) {
    INFO("schema: " << c.schema << "\ndoc: " << doc << "\ngrammar:\n" << gbnf);
    CHECK(matches(g, doc));
    CHECK(ember::grammar::test::validate(json::parse(doc), schema, schema));  // the table itself is right
  }
  for (const auto& doc : c.reject) {
    INFO("schema: " << c.schema << "\ndoc: " << doc);
    CHECK_FALSE(matches(g, doc));
  }
}

std::string schema_error(const std::string& schema) {
  try {
    json_schema_to_gbnf(std::string_view(schema));
  } catch (const SchemaError& e) {
    return e.keyword() + " @ " + e.pointer();
  }
  return "";
}

}  // namespace

TEST_CASE("schema: primitive types") {
  check_schema({R"({"type":"string"})", {R"("")", R"("a b")", R"("\"\\\u00e9\n")", "\"\xC3\xA9\""}, {"a", R"("\x")", "\"\n\"", "1"}});
  check_schema({R"({"type":"integer"})", {"0", "-12", "1234567890123456"}, {"01", "1.5", "-", "12345678901234567", "\"1\""}});
  check_schema({R"({"type":"number"})", {"0", "-1.25", "3e10", "1E-5", "0.5"}, {".5", "1.", "01", "1e", "+1"}});
  check_schema({R"({"type":"boolean"})", {"true", "false"}, {"True", "1"}});
  check_schema({R"({"type":"null"})", {"null"}, {"nul", "None"}});
  check_schema({R"({"type":["string","null"]})", {"null", R"("x")"}, {"1"}});
  check_schema({R"({})", {"1", R"({"a":[true,null]})", R"("s")"}, {"", "{"}});
}

TEST_CASE("schema: objects") {
  check_schema({R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"],
                  "additionalProperties":false})",
                {R"({"a":1})", R"({"a":1,"b":"x"})", R"({ "a" : 1 , "b" : "x" })", "{\n  \"a\": 1\n}"},
                {R"({})", R"({"b":"x"})", R"({"a":1,"c":2})", R"({"b":"x","a":1})", R"({"a":"1"})", R"({"a":1,})",
                 "{\n\n\"a\":1}", "{" + std::string(30, ' ') + "\"a\":1}"}});
  // All optional, additional properties allowed (absent): extra keys must differ from declared ones.
  check_schema({R"({"type":"object","properties":{"id":{"type":"integer"}}})",
                {R"({})", R"({"id":1})", R"({"id":1,"x":"y"})", R"({"x":[1]})", R"({"i":true,"idx":0})"},
                {R"({"id":"s"})", R"({"x":1,"id":2})"}});
  check_schema({R"({"type":"object","additionalProperties":{"type":"boolean"}})",
                {R"({})", R"({"a":true,"b":false})"}, {R"({"a":1})"}});
  check_schema({R"({"properties":{"n":{"type":"null"}},"required":["n","m"]})", {R"({"n":null,"m":3})"}, {R"({"n":null})"}});
}

TEST_CASE("schema: arrays") {
  check_schema({R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
                {"[1]", "[1,2,3]", "[ 1 , 2 ]"}, {"[]", "[1,2,3,4]", "[1,]", R"(["a"])"}});
  check_schema({R"({"type":"array"})", {"[]", R"([1,"a",{}])"}, {"[,]"}});
  check_schema({R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
                {"[]", R"(["a"])", R"(["a",1])"}, {R"(["a",1,2])", "[1]"}});
  check_schema({R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"boolean"},"minItems":2})",
                {R"(["a",true])", R"(["a",true,false])"}, {R"(["a"])", R"(["a","b"])"}});
  check_schema({R"({"type":"array","maxItems":0})", {"[]"}, {"[1]"}});
}

TEST_CASE("schema: enum, const, anyOf, oneOf, allOf, $ref") {
  check_schema({R"({"enum":["red","green",1,null]})", {R"("red")", "1", "null"}, {R"("blue")", "2"}});
  check_schema({R"({"const":{"a":[1,2]}})", {R"({"a":[1,2]})"}, {R"({"a":[1]})"}});
  check_schema({R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})", {"5", R"("ab")"}, {R"("abc")", "true"}});
  check_schema({R"({"oneOf":[{"type":"boolean"},{"type":"null"}]})", {"true", "null"}, {"0"}});
  check_schema({R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                             {"properties":{"b":{"type":"boolean"}},"required":["b"]}]})",
                {R"({"a":1,"b":true})"}, {R"({"a":1})", R"({"b":true})"}});
  check_schema({R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},
                  "required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
                {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":null}})"}, {R"({"v":1})"}});
  check_schema({R"({"definitions":{"s":{"type":"string"}},"type":"array","items":{"$ref":"#/definitions/s"}})",
                {R"(["a","b"])"}, {"[1]"}});
}

TEST_CASE("schema: strings with bounds, formats and patterns") {
  check_schema({R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", "\"\xC3\xA9\xC3\xA9\"", R"("a\nb")"}, {R"("a")", R"("abcd")"}});
  check_schema({R"({"type":"string","format":"date"})", {R"("2024-02-29")"}, {R"("2024-13-01")", R"("24-01-01")"}});
  check_schema({R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}});
  check_schema({R"({"type":"string","format":"time"})", {R"("23:59:59Z")", R"("01:02:03.5+02:00")"}, {R"("24:00:00Z")"}});
  check_schema({R"({"type":"string","pattern":"^[a-z]{2,3}-\\d+$"})", {R"("ab-1")", R"("xyz-042")"}, {R"("a-1")", R"("ab-")", R"("AB-1")"}});
  check_schema({R"x({"type":"string","pattern":"^(foo|ba[rz])?x*$"})x", {R"("")", R"("foo")", R"("bazxx")"}, {R"("fo")", R"("bar_")"}});
  check_schema({R"({"type":"string","pattern":"ab"})", {R"("ab")", R"("xaby")"}, {R"("a")", R"("ba")"}});
  check_schema({R"({"type":"string","pattern":"^[^a]\"$"})", {R"("b\"")", R"("\\\"")"}, {R"("a\"")"}});
  check_schema({R"x({"type":"string","pattern":"^(?:\\w\\.)+$"})x", {R"("a.b.")"}, {R"("a.b")"}});
}

TEST_CASE("schema: integer ranges are exact") {
  const std::pair<int64_t, int64_t> ranges[] = {{0, 0}, {0, 9}, {5, 123}, {-15, 7}, {-300, -20}, {123, 456}, {99, 1000}, {1, 100000}};
  for (const auto& range : ranges) {
    const int64_t lo = range.first, hi = range.second;  // not a structured binding: INFO captures them
    const json schema = {{"type", "integer"}, {"minimum", lo}, {"maximum", hi}};
    const auto g = Grammar::parse(json_schema_to_gbnf(schema));
    for (int64_t v = lo - 30; v <= std::min(hi + 30, lo + 3000); ++v) {
      INFO("range [" << lo << ", " << hi << "] value " << v);
      CHECK(matches(g, std::to_string(v)) == (v >= lo && v <= hi));
    }
    CHECK(matches(g, std::to_string(hi)));
  }
  check_schema({R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":3})", {"1", "2"}, {"0", "3", "-1", "01"}});
  check_schema({R"({"type":"integer","minimum":10})", {"10", "9999999"}, {"9", "-10"}});
  check_schema({R"({"type":"number","minimum":0})", {"0", "1.5", "2e3"}, {"-1"}});
}

TEST_CASE("schema: unsupported keywords are errors naming keyword and pointer") {
  CHECK(schema_error(R"({"type":"array","uniqueItems":true})") == "uniqueItems @ ");
  CHECK(schema_error(R"({"type":"object","properties":{"a":{"type":"string","format":"email"}}})") == "format @ /properties/a");
  CHECK(schema_error(R"({"type":"object","patternProperties":{"a":{}}})") == "patternProperties @ ");
  CHECK(schema_error(R"({"not":{"type":"string"}})") == "not @ ");
  CHECK(schema_error(R"({"type":"number","maximum":3.5})") == "maximum @ ");
  CHECK(schema_error(R"({"type":"integer","multipleOf":2})") == "multipleOf @ ");
  CHECK(schema_error(R"({"$ref":"https://example.com/s.json"})") == "$ref @ /$ref");
  CHECK(schema_error(R"({"$ref":"#/$defs/missing"})") == "$ref @ /$ref");
  CHECK(schema_error(R"x({"type":"string","pattern":"^(a)\\1$"})x") == "pattern @ ");
  CHECK(schema_error(R"x({"type":"string","pattern":"(?=a)"})x") == "pattern @ ");
  CHECK(schema_error(R"({"type":"string","pattern":"^a|b$"})") == "pattern @ ");
  CHECK(schema_error(R"({"type":"string","pattern":"a","maxLength":3})") == "pattern @ ");
  CHECK(schema_error(R"({"type":"integer","minimum":5,"maximum":1})") == "minimum @ ");
  CHECK(schema_error(R"({"items":{"type":"wat"}})") == "type @ /items");
  CHECK(schema_error(R"({"anyOf":[{"type":"string"}],"type":"string"})") == "type @ ");
  CHECK(schema_error(R"(false)") == "false @ ");
  CHECK(schema_error(R"({"type":"string","maxLength":100000})") == "maxLength @ ");
  CHECK(schema_error("{not json") == " @ ");
}

TEST_CASE("schema: hostile schemas are refused or compiled in bounded time") {
  const auto t0 = std::chrono::steady_clock::now();
  std::string deep = R"({"type":"string"})";
  for (int i = 0; i < 200; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  CHECK(schema_error(deep).rfind("@ /items/items", 0) == std::string::npos);  // an error at some depth
  CHECK_FALSE(schema_error(deep).empty());
  // A $ref loop with no schema in between describes nothing: refused.
  CHECK(schema_error(R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})") == "$ref @ /$ref");
  // A reference back to the root before any character: `x ::= x | null`, which the matcher runs
  // without looping (the cycle pushes no stack frame).
  CHECK(matches(Grammar::parse(json_schema_to_gbnf(std::string_view(R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})"))), "null"));
  // Large but legal: many properties, long bounded strings.
  json wide = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 200; ++i) deep = std::string(R"({"type":"array","items":)").append(deep).append("}");
  const auto g = Grammar::parse(json_schema_to_gbnf(wide));
  CHECK(matches(g, R"({"p7":"x","p200":"y"})"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
}

TEST_CASE("schema: json_object and any-value grammars") {
  const auto obj = Grammar::parse(json_object_gbnf());
  CHECK(matches(obj, R"({"a":[1,{"b":null}],"c":"d"})"));
  CHECK(matches(obj, "{}"));
  CHECK_FALSE(matches(obj, "[]"));
  CHECK_FALSE(matches(obj, R"({"a":1)"));
  const auto any = Grammar::parse(json_value_gbnf());
  CHECK(matches(any, "[]"));
  CHECK(matches(any, "-0.5e+3"));
}


TEST_CASE("schema: random walks through the mask produce valid documents") {
  const char* schemas[] = {
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":150},
          "tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":4},"ok":{"type":"boolean"}},"required":["name","age"],
          "additionalProperties":false})",
      R"({"type":"array","items":{"anyOf":[{"type":"number"},{"type":"null"},{"type":"string","pattern":"^[a-c]+\\.?$"}]},"minItems":2,"maxItems":5})",
      R"({"type":"object","properties":{"id":{"type":"integer","minimum":-50,"maximum":50}},"additionalProperties":{"type":"integer"}})",
      R"({"$defs":{"t":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":2}},
          "required":["v"],"additionalProperties":false}},"$ref":"#/$defs/t"})",
      R"({"type":"object","properties":{"d":{"type":"string","format":"date"},"u":{"type":"string","format":"uuid"},
          "s":{"type":"string","minLength":1}},"required":["d","u","s"]})",
      R"({"type":"object"})",
  };
  std::mt19937 rng(1234);
  int walks = 0;
  for (const char* text : schemas) {
    const json schema = json::parse(text);
    const auto g = Grammar::parse(json_schema_to_gbnf(std::string_view(text)));
    for (int i = 0; i < 25; ++i) {
      Matcher m(g, walk_vocab());
      const auto doc = random_walk(m, rng, 40 + i * 4);
      INFO("schema: " << text);
      REQUIRE(doc.has_value());
      INFO("doc: " << *doc);
      json parsed;
      CHECK_NOTHROW(parsed = json::parse(*doc));
      CHECK(ember::grammar::test::validate(parsed, schema, schema));
      ++walks;
    }
  }
  CHECK(walks == 150);
}

TEST_CASE("schema: an integer bound beyond 16 digits clamps to the 16-digit cap, not past it") {
  const json schema = {{"type", "integer"}, {"minimum", -1e20}, {"maximum", 1e20}};
  const auto g = Grammar::parse(json_schema_to_gbnf(schema));
  CHECK(matches(g, "9999999999999999"));
  CHECK(matches(g, "-9999999999999999"));
  CHECK_FALSE(matches(g, "10000000000000000"));
  CHECK_FALSE(matches(g, "-10000000000000000"));
}
