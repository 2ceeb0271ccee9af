#include "core/gguf/gguf_value.h"

#include <cmath>
#include <limits>

namespace ember::gguf {
namespace {

std::string quoted(std::string_view key) {
  std::string text;  // appended piecewise: g++ 12 warns falsely (-Wrestrict) on "literal" + string
  text.reserve(key.size() + 2);
  text += '\'';
  text += key;
  text += '\'';
  return text;
}

std::string type_text(const Value& v) {
  std::string t(value_type_name(v.type));
  if (v.type == ValueType::ARRAY) t += " of " + std::string(value_type_name(v.array_type));
  return t;
}

[[noreturn]] void wrong_type(std::string_view key, const Value& v, std::string_view expected) {
  throw GgufError("metadata key " + quoted(key) + " has type " + type_text(v) + ", expected " +
                  std::string(expected));
}

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

}  // namespace

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "UINT8";
    case ValueType::INT8: return "INT8";
    case ValueType::UINT16: return "UINT16";
    case ValueType::INT16: return "INT16";
    case ValueType::UINT32: return "UINT32";
    case ValueType::INT32: return "INT32";
    case ValueType::FLOAT32: return "FLOAT32";
    case ValueType::BOOL: return "BOOL";
    case ValueType::STRING: return "STRING";
    case ValueType::ARRAY: return "ARRAY";
    case ValueType::UINT64: return "UINT64";
    case ValueType::INT64: return "INT64";
    case ValueType::FLOAT64: return "FLOAT64";
  }
  return "UNKNOWN";
}

bool is_known_value_type(uint32_t raw) { return raw <= static_cast<uint32_t>(ValueType::FLOAT64); }

bool is_integer_type(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

uint64_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: return 0;
  }
  return 0;
}

void Metadata::add(std::string key, Value value) {
  if (key.empty()) throw GgufError("metadata key is empty");
  if (index_.count(key) != 0) throw GgufError("duplicate metadata key " + quoted(key));
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
}

bool Metadata::contains(std::string_view key) const { return find(key) != nullptr; }

const Value* Metadata::find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

std::optional<std::string> Metadata::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::STRING) wrong_type(key, *v, "STRING");
  return std::get<std::string>(v->data);
}

std::optional<uint64_t> Metadata::get_uint(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!is_integer_type(v->type)) wrong_type(key, *v, "an integer");
  if (const auto* u = std::get_if<uint64_t>(&v->data)) return *u;
  const int64_t i = std::get<int64_t>(v->data);
  if (i < 0) throw GgufError("metadata key " + quoted(key) + " is " + std::to_string(i) + ", expected >= 0");
  return static_cast<uint64_t>(i);
}

std::optional<int64_t> Metadata::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!is_integer_type(v->type)) wrong_type(key, *v, "an integer");
  if (const auto* i = std::get_if<int64_t>(&v->data)) return *i;
  const uint64_t u = std::get<uint64_t>(v->data);
  if (u > kInt64Max) throw GgufError("metadata key " + quoted(key) + " = " + std::to_string(u) + " does not fit int64");
  return static_cast<int64_t>(u);
}

std::optional<double> Metadata::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::FLOAT32 && v->type != ValueType::FLOAT64) wrong_type(key, *v, "FLOAT32 or FLOAT64");
  return std::get<double>(v->data);
}

std::optional<bool> Metadata::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::BOOL) wrong_type(key, *v, "BOOL");
  return std::get<bool>(v->data);
}

const std::vector<std::string>* Metadata::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return nullptr;
  if (v->type != ValueType::ARRAY || v->array_type != ValueType::STRING) wrong_type(key, *v, "ARRAY of STRING");
  return &std::get<std::vector<std::string>>(v->data);
}

std::optional<std::vector<double>> Metadata::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::ARRAY ||
      (v->array_type != ValueType::FLOAT32 && v->array_type != ValueType::FLOAT64)) {
    wrong_type(key, *v, "ARRAY of FLOAT32 or FLOAT64");
  }
  return std::get<std::vector<double>>(v->data);
}

std::optional<std::vector<int64_t>> Metadata::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::ARRAY || !is_integer_type(v->array_type)) wrong_type(key, *v, "ARRAY of integers");
  if (const auto* signed_values = std::get_if<std::vector<int64_t>>(&v->data)) return *signed_values;
  const auto& unsigned_values = std::get<std::vector<uint64_t>>(v->data);
  std::vector<int64_t> out;
  out.reserve(unsigned_values.size());
  for (size_t i = 0; i < unsigned_values.size(); ++i) {
    if (unsigned_values[i] > kInt64Max) {
      throw GgufError("metadata key " + quoted(key) + "[" + std::to_string(i) + "] = " +
                      std::to_string(unsigned_values[i]) + " does not fit int64");
    }
    out.push_back(static_cast<int64_t>(unsigned_values[i]));
  }
  return out;
}

}  // namespace ember::gguf
