// Broken and hostile GGUF files, each built byte by byte: every one must end in a GgufError whose
// message names the problem (never a crash, a hang or a huge allocation).
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

#include "tests/gguf/gguf_bytes.h"

using ember::gguf::GgufFile;
using ember::gguf::ReadLimits;
using ember::test::contains;
using ember::test::gguf_open_error;
using ember::test::GgufBytes;

#define CHECK_GGUF_ERROR(file_bytes, needle)                                          \
  do {                                                                                \
    const std::string message_ = gguf_open_error(file_bytes);                         \
    CHECK_MESSAGE(contains(message_, needle), "error was: \"" << message_ << "\""); \
  } while (0)

namespace {

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ4_0 = 2;
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

struct Spec {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = kF32;
  uint64_t offset = 0;
};

// Header, no metadata, the given tensor infos, padding to 32, then data_bytes of data.
std::string file_with(const std::vector<Spec>& tensors, uint64_t data_bytes, uint32_t version = 3) {
  GgufBytes b(version);
  b.header(tensors.size(), 0);
  for (const Spec& t : tensors) b.tensor_info(t.name, t.ne, t.type, t.offset);
  b.pad_to(32).zeros(data_bytes);
  return b.bytes;
}

std::string one_tensor(std::vector<uint64_t> ne, uint32_t type = kF32, uint64_t offset = 0, uint64_t data_bytes = 32) {
  return file_with({{"w", std::move(ne), type, offset}}, data_bytes);
}

// Header with one metadata entry whose key/type/value bytes the caller appends; no tensors.
GgufBytes one_kv(uint32_t version = 3) {
  GgufBytes b(version);
  b.header(0, 1);
  return b;
}

}  // namespace

TEST_CASE("gguf hostile: the well-formed base files used below do open") {
  CHECK(gguf_open_error(one_tensor({4, 2})) == "");
  CHECK(gguf_open_error(file_with({{"a", {8}, kF32, 0}, {"b", {8}, kF32, 32}}, 64, 1)) == "");
  GgufBytes pwri;
  pwri.header(0, 1, "PWRI").kv_u32("x", 1);
  CHECK(gguf_open_error(pwri.bytes) == "");
}

TEST_CASE("gguf hostile: empty file") { CHECK_GGUF_ERROR("", "file is empty"); }

TEST_CASE("gguf hostile: file shorter than the header") {
  GgufBytes b;
  b.raw("GGUF").u32(3).raw("abc");
  CHECK_GGUF_ERROR(b.bytes, "unexpected end of file reading tensor count");
  CHECK_GGUF_ERROR(std::string("GG"), "unexpected end of file reading magic");
}

TEST_CASE("gguf hostile: bad magic") {
  GgufBytes b;
  b.raw("GGUX").u32(3).u64(0).u64(0);
  CHECK_GGUF_ERROR(b.bytes, "bad magic");
}

TEST_CASE("gguf hostile: version 0") {
  GgufBytes b(0);
  b.raw("GGUF").u32(0).u64(0).u64(0);
  CHECK_GGUF_ERROR(b.bytes, "unsupported GGUF version 0");
}

TEST_CASE("gguf hostile: version 4") {
  GgufBytes b(4);
  b.header(0, 0);
  CHECK_GGUF_ERROR(b.bytes, "unsupported GGUF version 4");
}

TEST_CASE("gguf hostile: tensor count beyond the limit or the file") {
  GgufBytes huge;
  huge.header(kU64Max, 0);
  CHECK_GGUF_ERROR(huge.bytes, "tensor count 18446744073709551615 exceeds the limit");
  GgufBytes lying;
  lying.header(1000, 0).zeros(100);
  CHECK_GGUF_ERROR(lying.bytes, "tensor count 1000 exceeds what the 100 bytes left");
}

TEST_CASE("gguf hostile: metadata count beyond the limit or the file") {
  GgufBytes huge;
  huge.header(0, kU64Max);
  CHECK_GGUF_ERROR(huge.bytes, "metadata count 18446744073709551615 exceeds the limit");
  GgufBytes lying(1);  // v1: 32-bit counts
  lying.header(0, 5000).zeros(64);
  CHECK_GGUF_ERROR(lying.bytes, "metadata count 5000 exceeds what the 64 bytes left");
}

TEST_CASE("gguf hostile: array count overflowing or beyond the file") {
  GgufBytes overflow = one_kv();
  overflow.str("arr").u32(9).u32(10).u64(kU64Max / 8 + 2);  // ARRAY of UINT64: count * 8 wraps
  CHECK_GGUF_ERROR(overflow.bytes, "array count 2305843009213693953 of UINT64 exceeds the 0 bytes left");
  GgufBytes lying = one_kv();
  lying.str("arr").u32(9).u32(0).u64(1000).zeros(10);
  CHECK_GGUF_ERROR(lying.bytes, "array count 1000 of UINT8 exceeds the 10 bytes left");
  GgufBytes strings = one_kv(1);
  strings.str("arr").u32(9).u32(8).u32(6).str("a").str("b");  // 6 strings declared, 2 present
  CHECK_GGUF_ERROR(strings.bytes, "array count 6 of STRING exceeds");
}

TEST_CASE("gguf hostile: array count beyond ReadLimits") {
  GgufBytes b = one_kv();
  b.str("arr").u32(9).u32(0).u64(10).zeros(10);
  ReadLimits limits;
  limits.max_array_elements = 4;
  const std::string message = gguf_open_error(b.bytes, limits);
  CHECK_MESSAGE(contains(message, "array count 10 exceeds the limit of 4"), message);
}

TEST_CASE("gguf hostile: string lengths overflowing or beyond the file") {
  GgufBytes key = one_kv();
  key.u64(kU64Max).raw("k").zeros(16);
  CHECK_GGUF_ERROR(key.bytes, "metadata #0 key: string length 18446744073709551615");
  GgufBytes value = one_kv();
  value.str("s").u32(8).u64(kU64Max - 3).raw("abc");
  CHECK_GGUF_ERROR(value.bytes, "metadata key 's': string length 18446744073709551612");
  GgufBytes in_array = one_kv(1);
  in_array.str("arr").u32(9).u32(8).u32(2).str("ok").u32(1000).raw("short");
  CHECK_GGUF_ERROR(in_array.bytes, "metadata key 'arr'[1]: string length 1000 at offset");
}

TEST_CASE("gguf hostile: string length beyond ReadLimits") {
  GgufBytes b = one_kv();
  b.kv_string("s", "0123456789");
  ReadLimits limits;
  limits.max_string_bytes = 8;
  const std::string message = gguf_open_error(b.bytes, limits);
  CHECK_MESSAGE(contains(message, "string length 10 exceeds the limit of 8"), message);
}

TEST_CASE("gguf hostile: empty key") {
  GgufBytes b = one_kv();
  b.kv_u32("", 1);
  CHECK_GGUF_ERROR(b.bytes, "key is empty");
}

TEST_CASE("gguf hostile: duplicate key") {
  GgufBytes b;
  b.header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2);
  CHECK_GGUF_ERROR(b.bytes, "duplicate metadata key 'a.b'");
}

TEST_CASE("gguf hostile: unknown value type") {
  GgufBytes b = one_kv();
  b.str("k").u32(13).u32(0);
  CHECK_GGUF_ERROR(b.bytes, "metadata key 'k': value type is 13");
  GgufBytes element = one_kv();
  element.str("k").u32(9).u32(0xdeadbeef).u64(1).u32(0);
  CHECK_GGUF_ERROR(element.bytes, "array element type is 3735928559");
}

TEST_CASE("gguf hostile: nested arrays") {
  GgufBytes b = one_kv();
  b.str("nest").u32(9).u32(9).u64(1).u32(0).u64(1).u8(7);
  CHECK_GGUF_ERROR(b.bytes, "metadata key 'nest': nested arrays are not supported");
}

TEST_CASE("gguf hostile: general.alignment of the wrong type") {
  GgufBytes u64 = one_kv();
  u64.str("general.alignment").u32(10).u64(32);
  CHECK_GGUF_ERROR(u64.bytes, "'general.alignment' has type UINT64, expected UINT32");
  GgufBytes text = one_kv();
  text.kv_string("general.alignment", "32");
  CHECK_GGUF_ERROR(text.bytes, "'general.alignment' has type STRING");
}

TEST_CASE("gguf hostile: general.alignment 0, not a power of two, absurdly large") {
  for (uint32_t bad : {0u, 48u, 0xffffffffu}) {
    GgufBytes b = one_kv();
    b.kv_u32("general.alignment", bad);
    CHECK_GGUF_ERROR(b.bytes, "is not a power of two");
  }
  GgufBytes large = one_kv();
  large.kv_u32("general.alignment", 1u << 30);
  CHECK_GGUF_ERROR(large.bytes, "'general.alignment' = 1073741824 exceeds the limit");
}

TEST_CASE("gguf hostile: tensor name too long") {
  CHECK(gguf_open_error(file_with({{std::string(63, 'n'), {8}}}, 32)) == "");
  CHECK_GGUF_ERROR(file_with({{std::string(64, 'n'), {8}}}, 32), "name of 64 bytes is too long");
  CHECK_GGUF_ERROR(file_with({{std::string(65, 'n'), {8}}}, 32), "name of 65 bytes is too long");
  GgufBytes huge;
  huge.header(1, 0).u64(kU64Max).raw("x").zeros(40);
  CHECK_GGUF_ERROR(huge.bytes, "tensor #0 at offset 24: name of 18446744073709551615 bytes is too long");
}

TEST_CASE("gguf hostile: duplicate tensor name") {
  CHECK_GGUF_ERROR(file_with({{"w", {8}, kF32, 0}, {"w", {8}, kF32, 32}}, 64), "duplicate tensor name 'w'");
}

TEST_CASE("gguf hostile: n_dims 0") { CHECK_GGUF_ERROR(one_tensor({}), "tensor 'w': n_dims is 0"); }

TEST_CASE("gguf hostile: n_dims 5") { CHECK_GGUF_ERROR(one_tensor({1, 1, 1, 1, 8}), "tensor 'w': n_dims is 5"); }

TEST_CASE("gguf hostile: a zero dimension") {
  CHECK_GGUF_ERROR(one_tensor({8, 0}), "tensor 'w' ne[1] is 0: Ember rejects empty tensors");
}

TEST_CASE("gguf hostile: a negative dimension") {
  CHECK_GGUF_ERROR(one_tensor({8, uint64_t{1} << 63}), "tensor 'w' ne[1] is negative");
  CHECK_GGUF_ERROR(one_tensor({kU64Max}), "tensor 'w' ne[0] is negative (-1)");
}

TEST_CASE("gguf hostile: element count overflowing 64 bits or int64") {
  CHECK_GGUF_ERROR(one_tensor({1ull << 32, 1ull << 32}), "element count 4294967296x4294967296x1x1 overflows");
  CHECK_GGUF_ERROR(one_tensor({1ull << 40, 1ull << 23}), "overflows int64");
}

TEST_CASE("gguf hostile: byte size overflowing 64 bits") {
  // 2^62 F32 elements fit int64, their 2^64 bytes do not.
  CHECK_GGUF_ERROR(one_tensor({1ull << 31, 1ull << 31}), "byte size (8589934592 bytes x 2147483648 rows) overflows");
}

TEST_CASE("gguf hostile: offset + size wrapping when padded to the alignment") {
  // 16 bytes at the last aligned offset below 2^64: the end fits, the padded end wraps.
  CHECK_GGUF_ERROR(one_tensor({4}, kF32, kU64Max - 31), "padded to the alignment, overflows 64 bits");
  // Fits when padded, but the absolute offset (data section + relative) wraps.
  CHECK_GGUF_ERROR(one_tensor({4}, kF32, kU64Max - 63), "runs past the end of the file");
}

TEST_CASE("gguf hostile: unknown tensor type id") {
  CHECK_GGUF_ERROR(one_tensor({8}, 4), "unknown tensor type id 4");
  CHECK_GGUF_ERROR(one_tensor({8}, 1000), "unknown tensor type id 1000");
}

TEST_CASE("gguf hostile: ne[0] not a multiple of the block size") {
  CHECK_GGUF_ERROR(one_tensor({33}, kQ4_0, 0, 64), "ne[0] = 33 is not a multiple of Q4_0's block size 32");
  CHECK(gguf_open_error(one_tensor({32, 2}, kQ4_0, 0, 36)) == "");
}

TEST_CASE("gguf hostile: offsets out of order") {
  CHECK_GGUF_ERROR(file_with({{"a", {8}, kF32, 32}, {"b", {8}, kF32, 0}}, 64), "tensor 'b': offset 0 overlaps");
}

TEST_CASE("gguf hostile: overlapping tensors") {
  CHECK_GGUF_ERROR(file_with({{"a", {16}, kF32, 0}, {"b", {8}, kF32, 32}}, 128),
                   "tensor 'b': offset 32 overlaps the previous tensor or is out of order (expected >= 64)");
}

TEST_CASE("gguf hostile: misaligned offset") {
  CHECK_GGUF_ERROR(one_tensor({4}, kF32, 16, 64), "offset 16 is not a multiple of the alignment 32");
}

TEST_CASE("gguf hostile: data past the end of the file") {
  CHECK_GGUF_ERROR(one_tensor({8}, kF32, 1024, 32), "tensor 'w': data [1024, +32)");
}

TEST_CASE("gguf hostile: data truncated by one byte") {
  CHECK(gguf_open_error(one_tensor({8}, kF32, 0, 32)) == "");
  CHECK_GGUF_ERROR(one_tensor({8}, kF32, 0, 31), "runs past the end of the file");
}

TEST_CASE("gguf hostile: tensor info truncated") {
  GgufBytes b;
  b.header(1, 0).str("w").u32(2).u64(8).u64(8).zeros(8);  // the offset field is cut short
  CHECK_GGUF_ERROR(b.bytes, "unexpected end of file");
}

TEST_CASE("gguf hostile: errors name the file") {
  ember::test::TempFile file("GGUX1234");
  try {
    GgufFile::open(file.path());
    FAIL("opened a file with a bad magic");
  } catch (const ember::gguf::GgufError& e) {
    CHECK(contains(e.what(), file.path()));
  }
}
