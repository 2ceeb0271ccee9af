#pragma once
// GGUF metadata values and the key -> value table, with typed getters whose errors name the key.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

namespace ember::gguf {

// A malformed or unsupported file; the message says what is wrong and where (key, tensor, offset).
class GgufError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);
// True for the 13 types the GGUF spec defines (a raw id read from a file may be anything).
bool is_known_value_type(uint32_t raw);
// True for UINT8..INT64 (not BOOL).
bool is_integer_type(ValueType t);
// Bytes one scalar of this type takes in the file; 0 for STRING and ARRAY (variable length).
uint64_t scalar_size(ValueType t);

// One metadata value. Integers are widened to 64 bits and floats to double on read; `type` keeps
// the type the file used so the writer can reproduce it. Arrays are homogeneous and never nested.
struct Value {
  ValueType type = ValueType::UINT8;
  ValueType array_type = ValueType::UINT8;  // element type when type == ARRAY
  std::variant<uint64_t, int64_t, double, bool, std::string,
               std::vector<uint64_t>, std::vector<int64_t>, std::vector<double>, std::vector<uint8_t> /*bools*/,
               std::vector<std::string>>
      data;
};

class Metadata {
 public:
  // Insertion keeps file order. Throws GgufError on an empty or duplicate key.
  void add(std::string key, Value value);

  bool contains(std::string_view key) const;
  const Value* find(std::string_view key) const;
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

  // Typed getters: nullopt when the key is absent; GgufError naming the key when present with the
  // wrong type or a value out of range.
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<uint64_t> get_uint(std::string_view key) const;  // any integer type, value >= 0
  std::optional<int64_t> get_int(std::string_view key) const;    // any integer type that fits
  std::optional<double> get_float(std::string_view key) const;   // FLOAT32 / FLOAT64
  std::optional<bool> get_bool(std::string_view key) const;
  // Arrays; the pointer stays valid as long as the Metadata lives.
  const std::vector<std::string>* get_string_array(std::string_view key) const;
  std::optional<std::vector<double>> get_float_array(std::string_view key) const;  // FLOAT32/64 arrays
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;  // any integer array

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace ember::gguf
