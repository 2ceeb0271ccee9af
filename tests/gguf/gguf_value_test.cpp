// Metadata: insertion order, duplicate and empty keys, and typed getters whose errors name the key.
#include <doctest/doctest.h>

#include <functional>
#include <limits>

#include "core/gguf/gguf_value.h"
#include "tests/gguf/gguf_bytes.h"

using ember::gguf::GgufError;
using ember::gguf::Metadata;
using ember::gguf::Value;
using ember::gguf::ValueType;
using ember::test::contains;

namespace {

Value make(ValueType t, decltype(Value::data) d, ValueType element = ValueType::UINT8) {
  Value v;
  v.type = t;
  v.array_type = element;
  v.data = std::move(d);
  return v;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const GgufError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("metadata: keeps insertion order and refuses empty or duplicate keys") {
  Metadata md;
  md.add("b", make(ValueType::UINT32, uint64_t{1}));
  md.add("a", make(ValueType::UINT32, uint64_t{2}));
  REQUIRE(md.entries().size() == 2);
  CHECK(md.entries()[0].first == "b");
  CHECK(md.entries()[1].first == "a");
  CHECK(md.contains("a"));
  CHECK_FALSE(md.contains("c"));
  CHECK(md.find("c") == nullptr);
  CHECK(contains(error_of([&] { md.add("a", make(ValueType::UINT8, uint64_t{0})); }), "duplicate metadata key 'a'"));
  CHECK(contains(error_of([&] { md.add("", make(ValueType::UINT8, uint64_t{0})); }), "key is empty"));
}

TEST_CASE("metadata: integer getters convert between signed and unsigned only when the value fits") {
  Metadata md;
  md.add("u", make(ValueType::UINT16, uint64_t{500}));
  md.add("neg", make(ValueType::INT32, int64_t{-3}));
  md.add("pos", make(ValueType::INT8, int64_t{3}));
  md.add("huge", make(ValueType::UINT64, std::numeric_limits<uint64_t>::max()));
  md.add("f", make(ValueType::FLOAT32, 0.5));
  CHECK(md.get_uint("u") == 500u);
  CHECK(md.get_int("u") == 500);
  CHECK(md.get_uint("pos") == 3u);
  CHECK(md.get_int("neg") == -3);
  CHECK(md.get_uint("absent") == std::nullopt);
  CHECK(contains(error_of([&] { md.get_uint("neg"); }), "'neg' is -3, expected >= 0"));
  CHECK(contains(error_of([&] { md.get_int("huge"); }), "'huge' = 18446744073709551615 does not fit int64"));
  CHECK(contains(error_of([&] { md.get_uint("f"); }), "'f' has type FLOAT32, expected an integer"));
  CHECK(md.get_float("f") == 0.5);
  CHECK(contains(error_of([&] { md.get_float("u"); }), "'u' has type UINT16, expected FLOAT32 or FLOAT64"));
}

TEST_CASE("metadata: string, bool and array getters check the type") {
  Metadata md;
  md.add("s", make(ValueType::STRING, std::string("x")));
  md.add("b", make(ValueType::BOOL, true));
  md.add("strs", make(ValueType::ARRAY, std::vector<std::string>{"p", "q"}, ValueType::STRING));
  md.add("u8s", make(ValueType::ARRAY, std::vector<uint64_t>{1, 2}, ValueType::UINT8));
  md.add("big", make(ValueType::ARRAY, std::vector<uint64_t>{1ull << 63}, ValueType::UINT64));
  md.add("f64s", make(ValueType::ARRAY, std::vector<double>{1.5}, ValueType::FLOAT64));
  CHECK(md.get_string("s") == "x");
  CHECK(md.get_bool("b") == true);
  CHECK(contains(error_of([&] { md.get_string("b"); }), "'b' has type BOOL, expected STRING"));
  CHECK(contains(error_of([&] { md.get_bool("s"); }), "'s' has type STRING, expected BOOL"));
  REQUIRE(md.get_string_array("strs") != nullptr);
  CHECK(md.get_string_array("strs")->size() == 2);
  CHECK(md.get_string_array("absent") == nullptr);
  CHECK(contains(error_of([&] { md.get_string_array("u8s"); }), "'u8s' has type ARRAY of UINT8, expected ARRAY of STRING"));
  CHECK(md.get_int_array("u8s") == std::vector<int64_t>{1, 2});
  CHECK(contains(error_of([&] { md.get_int_array("big"); }), "'big'[0] = 9223372036854775808 does not fit int64"));
  CHECK(md.get_float_array("f64s") == std::vector<double>{1.5});
  CHECK(contains(error_of([&] { md.get_float_array("strs"); }), "expected ARRAY of FLOAT32 or FLOAT64"));
  CHECK(contains(error_of([&] { md.get_int_array("s"); }), "'s' has type STRING, expected ARRAY of integers"));
}
