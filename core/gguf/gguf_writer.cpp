#include "core/gguf/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace ember::gguf {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxNameBytes = 64;  // GGML_MAX_NAME, including the NUL ggml appends
constexpr const char* kAlignmentKey = "general.alignment";

std::string str(uint64_t v) { return std::to_string(v); }

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Serialises values into a byte string; the writer then emits it with one write.
class Encoder {
 public:
  std::string bytes;

  template <typename T>
  void scalar(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void string(std::string_view s) {
    scalar<uint64_t>(s.size());
    bytes.append(s.data(), s.size());
  }

  void value(const std::string& key, const Value& v) {
    if (v.type == ValueType::ARRAY) {
      if (v.array_type == ValueType::ARRAY) throw GgufError("metadata key '" + key + "': nested arrays are not supported");
      scalar<uint32_t>(static_cast<uint32_t>(ValueType::ARRAY));
      scalar<uint32_t>(static_cast<uint32_t>(v.array_type));
      array(key, v);
      return;
    }
    scalar<uint32_t>(static_cast<uint32_t>(v.type));
    element(key, v.type, v.data);
  }

 private:
  using Data = decltype(Value::data);

  [[noreturn]] static void mismatch(const std::string& key, ValueType t) {
    throw GgufError("metadata key '" + key + "': value does not hold a " + std::string(value_type_name(t)));
  }
  [[noreturn]] static void out_of_range(const std::string& key, ValueType t) {
    throw GgufError("metadata key '" + key + "': value out of range for " + std::string(value_type_name(t)));
  }

  template <typename Narrow, typename Wide>
  void narrowed(const std::string& key, ValueType t, Wide v) {
    if (v < static_cast<Wide>(std::numeric_limits<Narrow>::min()) ||
        v > static_cast<Wide>(std::numeric_limits<Narrow>::max())) {
      out_of_range(key, t);
    }
    scalar<Narrow>(static_cast<Narrow>(v));
  }

  void unsigned_int(const std::string& key, ValueType t, uint64_t v) {
    switch (t) {
      case ValueType::UINT8: return narrowed<uint8_t>(key, t, v);
      case ValueType::UINT16: return narrowed<uint16_t>(key, t, v);
      case ValueType::UINT32: return narrowed<uint32_t>(key, t, v);
      default: return scalar<uint64_t>(v);
    }
  }
  void signed_int(const std::string& key, ValueType t, int64_t v) {
    switch (t) {
      case ValueType::INT8: return narrowed<int8_t>(key, t, v);
      case ValueType::INT16: return narrowed<int16_t>(key, t, v);
      case ValueType::INT32: return narrowed<int32_t>(key, t, v);
      default: return scalar<int64_t>(v);
    }
  }
  void floating(ValueType t, double v) {
    if (t == ValueType::FLOAT32) return scalar<float>(static_cast<float>(v));
    scalar<double>(v);
  }

  void element(const std::string& key, ValueType t, const Data& d) {
    switch (t) {
      case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
        if (const auto* u = std::get_if<uint64_t>(&d)) return unsigned_int(key, t, *u);
        break;
      case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
        if (const auto* i = std::get_if<int64_t>(&d)) return signed_int(key, t, *i);
        break;
      case ValueType::FLOAT32: case ValueType::FLOAT64:
        if (const auto* f = std::get_if<double>(&d)) return floating(t, *f);
        break;
      case ValueType::BOOL:
        if (const auto* b = std::get_if<bool>(&d)) return scalar<uint8_t>(*b ? 1 : 0);
        break;
      case ValueType::STRING:
        if (const auto* s = std::get_if<std::string>(&d)) return string(*s);
        break;
      case ValueType::ARRAY:
        break;
    }
    mismatch(key, t);
  }

  void array(const std::string& key, const Value& v) {
    const ValueType t = v.array_type;
    auto each = [&](const auto& items, auto write_one) {
      scalar<uint64_t>(items.size());
      for (const auto& item : items) write_one(item);
    };
    if (const auto* u = std::get_if<std::vector<uint64_t>>(&v.data); u && is_integer_type(t)) {
      if (t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64) mismatch(key, t);
      return each(*u, [&](uint64_t x) { unsigned_int(key, t, x); });
    }
    if (const auto* i = std::get_if<std::vector<int64_t>>(&v.data); i && is_integer_type(t)) {
      if (t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 || t == ValueType::UINT64) mismatch(key, t);
      return each(*i, [&](int64_t x) { signed_int(key, t, x); });
    }
    if (const auto* f = std::get_if<std::vector<double>>(&v.data);
        f && (t == ValueType::FLOAT32 || t == ValueType::FLOAT64)) {
      return each(*f, [&](double x) { floating(t, x); });
    }
    if (const auto* b = std::get_if<std::vector<uint8_t>>(&v.data); b && t == ValueType::BOOL) {
      return each(*b, [&](uint8_t x) { scalar<uint8_t>(x != 0 ? 1 : 0); });
    }
    if (const auto* s = std::get_if<std::vector<std::string>>(&v.data); s && t == ValueType::STRING) {
      return each(*s, [&](const std::string& x) { string(x); });
    }
    throw GgufError("metadata key '" + key + "': value does not hold an ARRAY of " + std::string(value_type_name(t)));
  }
};

Value scalar_value(ValueType t, decltype(Value::data) d) {
  Value v;
  v.type = t;
  v.data = std::move(d);
  return v;
}

Value array_value(ValueType element, decltype(Value::data) d) {
  Value v;
  v.type = ValueType::ARRAY;
  v.array_type = element;
  v.data = std::move(d);
  return v;
}

}  // namespace

GgufWriter::GgufWriter() = default;

GgufWriter::~GgufWriter() {
  if (out_ != nullptr) std::fclose(out_);
}

void GgufWriter::set_powerinfer_magic(bool pwri) { pwri_ = pwri; }

void GgufWriter::set_alignment(uint64_t alignment) {
  if (out_ != nullptr) throw std::logic_error("GgufWriter: set_alignment after begin()");
  if (!is_power_of_two(alignment) || alignment > std::numeric_limits<uint32_t>::max()) {
    throw GgufError("alignment " + str(alignment) + " is not a power of two that fits 32 bits");
  }
  alignment_ = alignment;
}

void GgufWriter::add_u32(std::string key, uint32_t v) { add_value(std::move(key), scalar_value(ValueType::UINT32, uint64_t{v})); }
void GgufWriter::add_i32(std::string key, int32_t v) { add_value(std::move(key), scalar_value(ValueType::INT32, int64_t{v})); }
void GgufWriter::add_u64(std::string key, uint64_t v) { add_value(std::move(key), scalar_value(ValueType::UINT64, v)); }
void GgufWriter::add_f32(std::string key, float v) { add_value(std::move(key), scalar_value(ValueType::FLOAT32, double{v})); }
void GgufWriter::add_bool(std::string key, bool v) { add_value(std::move(key), scalar_value(ValueType::BOOL, v)); }
void GgufWriter::add_string(std::string key, std::string v) {
  add_value(std::move(key), scalar_value(ValueType::STRING, std::move(v)));
}
void GgufWriter::add_string_array(std::string key, std::vector<std::string> v) {
  add_value(std::move(key), array_value(ValueType::STRING, std::move(v)));
}
void GgufWriter::add_f32_array(std::string key, const std::vector<float>& v) {
  add_value(std::move(key), array_value(ValueType::FLOAT32, std::vector<double>(v.begin(), v.end())));
}
void GgufWriter::add_i32_array(std::string key, const std::vector<int32_t>& v) {
  add_value(std::move(key), array_value(ValueType::INT32, std::vector<int64_t>(v.begin(), v.end())));
}

void GgufWriter::add_value(std::string key, const Value& v) {
  if (out_ != nullptr) throw std::logic_error("GgufWriter: metadata added after begin()");
  Encoder probe;  // fails now, naming the key, rather than halfway through writing the file
  probe.value(key, v);
  // The alignment is writer state, not free metadata: it decides the layout, so it is kept in one
  // place and written from there (and only when it differs from the default, as ggml does).
  if (key == kAlignmentKey) {
    if (v.type != ValueType::UINT32) throw GgufError("metadata key 'general.alignment' must be UINT32");
    if (metadata_.contains(key)) throw GgufError("duplicate metadata key 'general.alignment'");
    set_alignment(std::get<uint64_t>(v.data));
    return;
  }
  metadata_.add(std::move(key), v);
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<uint64_t> ne) {
  if (out_ != nullptr) throw std::logic_error("GgufWriter: tensor added after begin()");
  const std::string where = "tensor '" + name + "'";
  if (name.empty()) throw GgufError("tensor name is empty");
  if (name.size() >= kMaxNameBytes) {
    throw GgufError(where + ": name must be shorter than " + str(kMaxNameBytes) + " bytes");
  }
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) throw GgufError("duplicate tensor name '" + name + "'");
  }
  if (ne.empty() || ne.size() > 4) throw GgufError(where + ": needs 1..4 dimensions, got " + str(ne.size()));
  uint64_t rows = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] == 0 || ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw GgufError(where + ": ne[" + str(d) + "] = " + str(ne[d]) + " is out of range");
    }
    if (d > 0 && __builtin_mul_overflow(rows, ne[d], &rows)) throw GgufError(where + ": element count overflows");
  }
  uint64_t n_bytes;
  try {
    if (__builtin_mul_overflow(row_bytes(type, ne[0]), rows, &n_bytes)) throw std::overflow_error("overflow");
  } catch (const std::exception& e) {
    throw GgufError(where + ": " + e.what());
  }

  tensors_.push_back(PendingTensor{std::move(name), type, std::move(ne), n_bytes, /*offset, set by begin()*/ 0});
}

void GgufWriter::begin(const std::string& path) {
  if (out_ != nullptr) throw std::logic_error("GgufWriter: begin() called twice");
  // Offsets are laid out here, once the alignment is final.
  uint64_t offset = 0;
  for (PendingTensor& t : tensors_) {
    if (__builtin_add_overflow(offset, alignment_ - 1, &offset)) throw GgufError("tensor data exceed 64-bit offsets");
    t.offset = offset & ~(alignment_ - 1);
    if (__builtin_add_overflow(t.offset, t.n_bytes, &offset)) throw GgufError("tensor data exceed 64-bit offsets");
  }

  Encoder header;
  header.scalar<uint32_t>(pwri_ ? 0x49525750u : 0x46554747u);
  header.scalar<uint32_t>(kVersion);
  header.scalar<uint64_t>(tensors_.size());
  const bool write_alignment = alignment_ != kDefaultAlignment;
  header.scalar<uint64_t>(metadata_.entries().size() + (write_alignment ? 1 : 0));
  if (write_alignment) {
    header.string(kAlignmentKey);
    header.value(kAlignmentKey, scalar_value(ValueType::UINT32, alignment_));
  }
  for (const auto& [key, value] : metadata_.entries()) {
    header.string(key);
    header.value(key, value);
  }
  for (const PendingTensor& t : tensors_) {
    header.string(t.name);
    header.scalar<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t n : t.ne) header.scalar<uint64_t>(n);
    header.scalar<uint32_t>(static_cast<uint32_t>(t.type));
    header.scalar<uint64_t>(t.offset);
  }
  header.bytes.resize((header.bytes.size() + alignment_ - 1) & ~(alignment_ - 1), '\0');

  out_ = std::fopen(path.c_str(), "wb");
  if (out_ == nullptr) throw GgufError(path + ": cannot open for writing: " + std::strerror(errno));
  path_ = path;
  current_ = 0;
  written_in_current_ = 0;
  write_raw(header.bytes.data(), header.bytes.size());
}

void GgufWriter::write_tensor_data(const void* data, uint64_t n) {
  if (out_ == nullptr) throw std::logic_error("GgufWriter: write_tensor_data before begin()");
  if (current_ >= tensors_.size()) {
    throw GgufError(path_ + ": " + str(n) + " bytes of tensor data written after the last tensor was complete");
  }
  PendingTensor& t = tensors_[current_];
  const uint64_t left = t.n_bytes - written_in_current_;
  if (n > left) {
    throw GgufError(path_ + ": tensor '" + t.name + "' is " + str(t.n_bytes) + " bytes; " + str(n) +
                    " more written with only " + str(left) + " left");
  }
  write_raw(data, n);
  written_in_current_ += n;
  if (written_in_current_ == t.n_bytes) {
    static constexpr char kZeros[256] = {};
    uint64_t pad = (alignment_ - t.n_bytes % alignment_) % alignment_;
    while (pad > 0) {
      const uint64_t chunk = std::min<uint64_t>(pad, sizeof(kZeros));
      write_raw(kZeros, chunk);
      pad -= chunk;
    }
    ++current_;
    written_in_current_ = 0;
  }
}

void GgufWriter::finish() {
  if (out_ == nullptr) throw std::logic_error("GgufWriter: finish() before begin()");
  if (current_ < tensors_.size()) {
    throw GgufError(path_ + ": tensor '" + tensors_[current_].name + "' got " + str(written_in_current_) + " of " +
                    str(tensors_[current_].n_bytes) + " bytes before finish()");
  }
  std::FILE* f = out_;
  out_ = nullptr;
  const bool flushed = std::fflush(f) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !flushed) {
    throw GgufError(path_ + ": write failed on close: " + std::strerror(flushed ? errno : err));
  }
}

void GgufWriter::write_raw(const void* p, uint64_t n) {
  if (n == 0) return;
  if (std::fwrite(p, 1, static_cast<size_t>(n), out_) != n) {
    throw GgufError(path_ + ": write of " + str(n) + " bytes failed: " + std::strerror(errno));
  }
}

}  // namespace ember::gguf
