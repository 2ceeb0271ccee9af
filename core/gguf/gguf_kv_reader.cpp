#include "core/gguf/gguf_kv_reader.h"

#include <vector>

namespace ember::gguf {
namespace {

ValueType read_type_id(ByteCursor& in, const FieldName& what) {
  const uint64_t at = in.position();
  const uint32_t raw = in.read_scalar<uint32_t>(what);
  if (!is_known_value_type(raw)) {
    throw GgufError(what.str() + " is " + std::to_string(raw) + " at offset " + std::to_string(at) +
                    ", which is not a GGUF value type");
  }
  return static_cast<ValueType>(raw);
}

template <typename Narrow>
Narrow read_as(ByteCursor& in, const FieldName& what) {
  return in.read_scalar<Narrow>(what);
}

// Integers widen to 64 bits (sign-extending the signed ones), floats to double.
uint64_t read_unsigned(ByteCursor& in, ValueType t, const FieldName& what) {
  switch (t) {
    case ValueType::UINT8: return read_as<uint8_t>(in, what);
    case ValueType::UINT16: return read_as<uint16_t>(in, what);
    case ValueType::UINT32: return read_as<uint32_t>(in, what);
    default: return read_as<uint64_t>(in, what);
  }
}

int64_t read_signed(ByteCursor& in, ValueType t, const FieldName& what) {
  switch (t) {
    case ValueType::INT8: return read_as<int8_t>(in, what);
    case ValueType::INT16: return read_as<int16_t>(in, what);
    case ValueType::INT32: return read_as<int32_t>(in, what);
    default: return read_as<int64_t>(in, what);
  }
}

double read_floating(ByteCursor& in, ValueType t, const FieldName& what) {
  if (t == ValueType::FLOAT32) return read_as<float>(in, what);
  return read_as<double>(in, what);
}

bool is_unsigned(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 || t == ValueType::UINT64;
}

template <typename T, typename ReadOne>
std::vector<T> read_elements(uint64_t count, ReadOne read_one) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>(count));  // count was checked against the file and the limits
  for (uint64_t i = 0; i < count; ++i) out.push_back(read_one(i));
  return out;
}

Value read_array(ByteCursor& in, const Encoding& enc, const ReadLimits& limits, const std::string& key) {
  const std::string where = "metadata key '" + key + "'";
  Value v;
  v.type = ValueType::ARRAY;
  v.array_type = read_type_id(in, where + ": array element type");
  if (v.array_type == ValueType::ARRAY) throw GgufError(where + ": nested arrays are not supported");
  const uint64_t count = read_count(in, enc, where + ": array count");

  // Every element takes at least this many bytes in the file (a string at least its length field),
  // so a count the rest of the file cannot hold is a lie, whatever the limits allow.
  const uint64_t min_element_bytes =
      v.array_type == ValueType::STRING ? (enc.narrow_counts ? 4 : 8) : scalar_size(v.array_type);
  if (count > in.remaining() / min_element_bytes) {
    throw GgufError(where + ": array count " + std::to_string(count) + " of " +
                    std::string(value_type_name(v.array_type)) + " exceeds the " + std::to_string(in.remaining()) +
                    " bytes left in the file");
  }
  if (count > limits.max_array_elements) {
    throw GgufError(where + ": array count " + std::to_string(count) + " exceeds the limit of " +
                    std::to_string(limits.max_array_elements));
  }

  const ValueType t = v.array_type;
  auto element = [&](uint64_t i) { return FieldName(where, i); };
  if (t == ValueType::STRING) {
    v.data = read_elements<std::string>(
        count, [&](uint64_t i) { return read_string(in, enc, limits.max_string_bytes, element(i)); });
  } else if (t == ValueType::BOOL) {
    v.data = read_elements<uint8_t>(count, [&](uint64_t i) {
      return static_cast<uint8_t>(read_as<uint8_t>(in, element(i)) != 0);
    });
  } else if (t == ValueType::FLOAT32 || t == ValueType::FLOAT64) {
    v.data = read_elements<double>(count, [&](uint64_t i) { return read_floating(in, t, element(i)); });
  } else if (is_unsigned(t)) {
    v.data = read_elements<uint64_t>(count, [&](uint64_t i) { return read_unsigned(in, t, element(i)); });
  } else {
    v.data = read_elements<int64_t>(count, [&](uint64_t i) { return read_signed(in, t, element(i)); });
  }
  return v;
}

}  // namespace

uint64_t read_count(ByteCursor& in, const Encoding& enc, const FieldName& what) {
  if (enc.narrow_counts) return in.read_scalar<uint32_t>(what);
  return in.read_scalar<uint64_t>(what);
}

std::string read_string(ByteCursor& in, const Encoding& enc, uint64_t max_bytes, const FieldName& what) {
  const uint64_t at = in.position();
  const uint64_t length = read_count(in, enc, what.with_suffix(" length"));
  if (length > in.remaining()) {
    throw GgufError(what.str() + ": string length " + std::to_string(length) + " at offset " + std::to_string(at) +
                    " exceeds the " + std::to_string(in.remaining()) + " bytes left in the file");
  }
  if (length > max_bytes) {
    throw GgufError(what.str() + ": string length " + std::to_string(length) + " exceeds the limit of " +
                    std::to_string(max_bytes) + " bytes");
  }
  std::string s(static_cast<size_t>(length), '\0');
  in.read(s.data(), length, what);
  return s;
}

Value read_value(ByteCursor& in, const Encoding& enc, const ReadLimits& limits, const std::string& key) {
  const std::string where = "metadata key '" + key + "'";
  const ValueType t = read_type_id(in, where + ": value type");
  if (t == ValueType::ARRAY) return read_array(in, enc, limits, key);
  Value v;
  v.type = t;
  if (t == ValueType::STRING) {
    v.data = read_string(in, enc, limits.max_string_bytes, where);
  } else if (t == ValueType::BOOL) {
    v.data = read_as<uint8_t>(in, where) != 0;
  } else if (t == ValueType::FLOAT32 || t == ValueType::FLOAT64) {
    v.data = read_floating(in, t, where);
  } else if (is_unsigned(t)) {
    v.data = read_unsigned(in, t, where);
  } else {
    v.data = read_signed(in, t, where);
  }
  return v;
}

}  // namespace ember::gguf
