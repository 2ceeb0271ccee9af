// GgufWriter: files it writes read back identically (metadata of every type, tensors of several
// types, alignments), with the standard layout, and misuse is refused.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"
#include "tests/gguf/gguf_bytes.h"

using ember::GgmlType;
using ember::gguf::GgufError;
using ember::gguf::GgufFile;
using ember::gguf::GgufWriter;
using ember::gguf::Metadata;
using ember::gguf::Value;
using ember::gguf::ValueType;
using ember::test::TempFile;

namespace {

Value scalar(ValueType t, decltype(Value::data) d) {
  Value v;
  v.type = t;
  v.data = std::move(d);
  return v;
}

Value array(ValueType element, decltype(Value::data) d) {
  Value v;
  v.type = ValueType::ARRAY;
  v.array_type = element;
  v.data = std::move(d);
  return v;
}

std::vector<uint8_t> pattern(uint64_t n, uint8_t seed) {
  std::vector<uint8_t> bytes(n);
  for (uint64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7);
  return bytes;
}

struct TensorCase {
  std::string name;
  GgmlType type;
  std::vector<uint64_t> ne;
  uint64_t n_bytes;
};

const std::vector<TensorCase>& tensor_cases() {
  static const std::vector<TensorCase> cases{
      {"token_embd.weight", GgmlType::F32, {8, 3}, 8 * 3 * 4},
      {"blk.0.attn_q.weight", GgmlType::F16, {5}, 10},  // 10 bytes: the next tensor needs padding
      {"blk.0.ffn_up.weight", GgmlType::Q4_0, {64, 2}, 2 * 2 * 18},
      {"blk.0.ffn_down.weight", GgmlType::Q8_0, {32, 1, 2}, 2 * 34},
      {"blk.0.q6k", GgmlType::Q6_K, {256, 1, 1, 2}, 2 * 210},
  };
  return cases;
}

// Every metadata type, scalar and array, including edge values.
std::vector<std::pair<std::string, Value>> every_kind_of_value() {
  using V = std::vector<uint64_t>;
  using I = std::vector<int64_t>;
  return {
      {"t.u8", scalar(ValueType::UINT8, uint64_t{255})},
      {"t.i8", scalar(ValueType::INT8, int64_t{-128})},
      {"t.u16", scalar(ValueType::UINT16, uint64_t{65535})},
      {"t.i16", scalar(ValueType::INT16, int64_t{-32768})},
      {"t.u32", scalar(ValueType::UINT32, uint64_t{4294967295u})},
      {"t.i32", scalar(ValueType::INT32, int64_t{-2147483647 - 1})},
      {"t.f32", scalar(ValueType::FLOAT32, double{1.5f})},
      {"t.bool", scalar(ValueType::BOOL, true)},
      {"t.string", scalar(ValueType::STRING, std::string("h\xc3\xa9llo\0x", 8))},
      {"t.u64", scalar(ValueType::UINT64, std::numeric_limits<uint64_t>::max())},
      {"t.i64", scalar(ValueType::INT64, std::numeric_limits<int64_t>::min())},
      {"t.f64", scalar(ValueType::FLOAT64, 0.1)},
      {"a.u8", array(ValueType::UINT8, V{0, 1, 255})},
      {"a.i8", array(ValueType::INT8, I{-1, 127})},
      {"a.u16", array(ValueType::UINT16, V{65535})},
      {"a.i16", array(ValueType::INT16, I{-300, 300})},
      {"a.u32", array(ValueType::UINT32, V{7, 8})},
      {"a.i32", array(ValueType::INT32, I{-7})},
      {"a.f32", array(ValueType::FLOAT32, std::vector<double>{0.25, -3.0})},
      {"a.bool", array(ValueType::BOOL, std::vector<uint8_t>{1, 0, 1})},
      {"a.string", array(ValueType::STRING, std::vector<std::string>{"a", "", "ccc"})},
      {"a.u64", array(ValueType::UINT64, V{std::numeric_limits<uint64_t>::max()})},
      {"a.i64", array(ValueType::INT64, I{std::numeric_limits<int64_t>::min(), 5})},
      {"a.f64", array(ValueType::FLOAT64, std::vector<double>{1e300})},
      {"a.empty", array(ValueType::INT32, I{})},
  };
}

void write_model(const std::string& path, uint64_t alignment, bool pwri = false) {
  GgufWriter w;
  if (alignment != 32) w.set_alignment(alignment);
  w.set_powerinfer_magic(pwri);
  for (const auto& [key, value] : every_kind_of_value()) w.add_value(key, value);
  w.add_u32("c.u32", 42);
  w.add_i32("c.i32", -42);
  w.add_u64("c.u64", 1ull << 40);
  w.add_f32("c.f32", 0.5f);
  w.add_bool("c.bool", false);
  w.add_string("c.string", "text");
  w.add_string_array("c.strings", {"x", "yz"});
  w.add_f32_array("c.f32s", {1.0f, 2.5f});
  w.add_i32_array("c.i32s", {-1, 2, -3});
  for (const TensorCase& t : tensor_cases()) w.add_tensor(t.name, t.type, t.ne);
  w.begin(path);
  uint8_t seed = 1;
  for (const TensorCase& t : tensor_cases()) {
    const std::vector<uint8_t> data = pattern(t.n_bytes, seed++);
    // In two pieces, to exercise appending to the current tensor.
    w.write_tensor_data(data.data(), t.n_bytes / 2);
    w.write_tensor_data(data.data() + t.n_bytes / 2, t.n_bytes - t.n_bytes / 2);
  }
  w.finish();
}

void check_model(const std::string& path, uint64_t alignment) {
  const GgufFile g = GgufFile::open(path);
  CHECK(g.version() == 3);
  CHECK(g.alignment() == alignment);
  const Metadata& md = g.metadata();
  CHECK(md.contains("general.alignment") == (alignment != 32));
  for (const auto& entry : every_kind_of_value()) {
    const std::string& key = entry.first;  // not a structured binding: clang 14 cannot capture those in INFO
    const Value& expected = entry.second;
    INFO("key ", key);
    const Value* got = md.find(key);
    REQUIRE(got != nullptr);
    CHECK(got->type == expected.type);
    if (expected.type == ValueType::ARRAY) CHECK(got->array_type == expected.array_type);
    CHECK(got->data == expected.data);
  }
  CHECK(md.get_uint("c.u32") == 42u);
  CHECK(md.get_int("c.i32") == -42);
  CHECK(md.get_uint("c.u64") == (1ull << 40));
  CHECK(md.get_float("c.f32") == 0.5);
  CHECK(md.get_bool("c.bool") == false);
  CHECK(md.get_string("c.string") == "text");
  CHECK(*md.get_string_array("c.strings") == std::vector<std::string>{"x", "yz"});
  CHECK(md.get_float_array("c.f32s") == std::vector<double>{1.0, 2.5});
  CHECK(md.get_int_array("c.i32s") == std::vector<int64_t>{-1, 2, -3});

  REQUIRE(g.tensors().size() == tensor_cases().size());
  uint8_t seed = 1;
  for (size_t i = 0; i < tensor_cases().size(); ++i) {
    const TensorCase& expected = tensor_cases()[i];
    const auto& t = g.tensors()[i];
    INFO("tensor ", expected.name);
    CHECK(t.name == expected.name);
    CHECK(t.type == expected.type);
    CHECK(t.n_dims == expected.ne.size());
    CHECK(t.n_bytes == expected.n_bytes);
    CHECK(t.offset % alignment == 0);
    std::vector<uint8_t> data(t.n_bytes);
    g.read_tensor(t, data.data());
    CHECK(data == pattern(expected.n_bytes, seed++));
  }
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("gguf writer: round trip of every metadata type and several tensor types") {
  TempFile file;
  write_model(file.path(), 32);
  check_model(file.path(), 32);
}

TEST_CASE("gguf writer: round trip with a non-default alignment writes general.alignment") {
  for (uint64_t alignment : {1ull, 64ull, 4096ull}) {
    INFO("alignment ", alignment);
    TempFile file;
    write_model(file.path(), alignment);
    check_model(file.path(), alignment);
    CHECK(GgufFile::open(file.path()).metadata().get_uint("general.alignment") ==
          (alignment == 32 ? std::nullopt : std::optional<uint64_t>(alignment)));
  }
}

TEST_CASE("gguf writer: standard layout (header, kv, infos, zero padding, padded data)") {
  TempFile file;
  GgufWriter w;
  w.add_u32("k", 7);
  w.add_tensor("a", GgmlType::F16, {3});  // 6 bytes, then 26 bytes of padding
  w.add_tensor("b", GgmlType::F32, {1});
  w.begin(file.path());
  const uint16_t a[3] = {1, 2, 3};
  const float b = 2.0f;
  w.write_tensor_data(a, sizeof(a));
  w.write_tensor_data(&b, sizeof(b));
  w.finish();

  const std::string bytes = file_bytes(file.path());
  ember::test::GgufBytes expected;
  expected.header(2, 1).kv_u32("k", 7).tensor_info("a", {3}, 1, 0).tensor_info("b", {1}, 0, 32).pad_to(32);
  expected.raw(std::string_view(reinterpret_cast<const char*>(a), sizeof(a))).pad_to(32).put(b).pad_to(32);
  CHECK(bytes == expected.bytes);

  const GgufFile g = GgufFile::open(file.path());
  CHECK(g.find_tensor("b")->offset == g.data_offset() + 32);
}

TEST_CASE("gguf writer: PowerInfer magic") {
  TempFile file;
  write_model(file.path(), 32, /*pwri=*/true);
  CHECK(file_bytes(file.path()).substr(0, 4) == "PWRI");
  CHECK(GgufFile::open(file.path()).is_powerinfer());
  check_model(file.path(), 32);
}

TEST_CASE("gguf writer: copying a file's metadata and tensors reproduces it") {
  TempFile original;
  write_model(original.path(), 64);
  const GgufFile source = GgufFile::open(original.path());
  TempFile copy;
  GgufWriter w;
  for (const auto& [key, value] : source.metadata().entries()) w.add_value(key, value);
  for (const auto& t : source.tensors()) {
    w.add_tensor(t.name, t.type, std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims));
  }
  w.begin(copy.path());
  for (const auto& t : source.tensors()) {
    const auto mapped = source.map_tensor(t);
    w.write_tensor_data(mapped.data(), mapped.size());
  }
  w.finish();
  CHECK(file_bytes(copy.path()) == file_bytes(original.path()));
}

TEST_CASE("gguf writer: refuses bad declarations and wrong amounts of data") {
  GgufWriter w;
  w.add_u32("k", 1);
  CHECK_THROWS_AS(w.add_u32("k", 2), GgufError);
  CHECK_THROWS_AS(w.add_u32("", 2), GgufError);
  CHECK_THROWS_AS(w.set_alignment(48), GgufError);
  CHECK_THROWS_AS(w.set_alignment(0), GgufError);
  CHECK_THROWS_AS(w.add_value("general.alignment", scalar(ValueType::UINT64, uint64_t{64})), GgufError);
  CHECK_THROWS_AS(w.add_value("bad", scalar(ValueType::UINT8, uint64_t{256})), GgufError);
  CHECK_THROWS_AS(w.add_value("bad", scalar(ValueType::INT32, uint64_t{1})), GgufError);
  CHECK_THROWS_AS(w.add_value("bad", array(ValueType::ARRAY, std::vector<uint64_t>{})), GgufError);
  CHECK_THROWS_AS(w.add_tensor(std::string(64, 'x'), GgmlType::F32, {1}), GgufError);
  CHECK_THROWS_AS(w.add_tensor("t", GgmlType::Q4_0, {33}), GgufError);
  CHECK_THROWS_AS(w.add_tensor("t", GgmlType::F32, {}), GgufError);
  CHECK_THROWS_AS(w.add_tensor("t", GgmlType::F32, {1, 0}), GgufError);
  CHECK_THROWS_AS(w.add_tensor("t", GgmlType::F32, {1, 1, 1, 1, 1}), GgufError);
  CHECK_THROWS_AS(w.add_tensor("t", static_cast<GgmlType>(4), {1}), GgufError);
  CHECK_THROWS_AS(w.add_tensor("t", GgmlType::F32, {1ull << 62, 1ull << 2}), GgufError);
  w.add_tensor("t", GgmlType::F32, {2});
  CHECK_THROWS_AS(w.add_tensor("t", GgmlType::F32, {2}), GgufError);

  TempFile file;
  w.begin(file.path());
  CHECK_THROWS_AS(w.add_u32("late", 1), std::logic_error);
  const float data[3] = {1, 2, 3};
  CHECK_THROWS_AS(w.write_tensor_data(data, sizeof(data)), GgufError);  // 12 bytes into an 8-byte tensor
  w.write_tensor_data(data, 4);
  CHECK_THROWS_AS(w.finish(), GgufError);  // 4 of 8 bytes
}

TEST_CASE("gguf writer: extra data after the last tensor is refused") {
  TempFile file;
  GgufWriter w;
  w.add_tensor("t", GgmlType::F32, {1});
  w.begin(file.path());
  const float x = 1;
  w.write_tensor_data(&x, 4);
  CHECK_THROWS_AS(w.write_tensor_data(&x, 4), GgufError);
  w.finish();
  CHECK(GgufFile::open(file.path()).tensors().size() == 1);
}
