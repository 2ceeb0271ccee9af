#pragma once
// A forward-only, buffered reader over a ReadOnlyFile for parsing headers: it reads the file in
// bounded chunks (never the whole file), and every read is checked against the bytes left, so a
// truncated or lying file ends in a GgufError naming what was being read and where.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "io/file.h"

namespace ember::gguf {

// Names the field being read, for error messages ("metadata key 'x'[12] length"). It only points at
// its parts and builds the text when an error needs it: array elements are read by the hundred
// thousand, and formatting a name for each would cost more than reading them. Callers pass
// temporaries that outlive the call, never store one.
class FieldName {
 public:
  FieldName(const std::string& base) : base_(base) {}  // implicit on purpose
  FieldName(const char* base) : base_(base) {}         // implicit on purpose
  FieldName(const std::string& base, uint64_t index) : base_(base), index_(index), indexed_(true) {}

  FieldName with_suffix(const char* suffix) const {
    FieldName f = *this;
    f.suffix_ = suffix;
    return f;
  }
  std::string str() const {
    std::string text(base_);
    if (indexed_) {
      text += '[';
      text += std::to_string(index_);
      text += ']';
    }
    text += suffix_;
    return text;
  }

 private:
  std::string_view base_;
  uint64_t index_ = 0;
  bool indexed_ = false;
  const char* suffix_ = "";
};

class ByteCursor {
 public:
  explicit ByteCursor(const io::ReadOnlyFile& file, uint64_t start = 0, size_t buffer_bytes = 64 * 1024);

  uint64_t position() const { return position_; }
  uint64_t remaining() const { return file_.size() - position_; }

  // Copies n bytes and advances; `what` names the field for the error when fewer than n are left.
  void read(void* dst, uint64_t n, const FieldName& what);

  template <typename T>
  T read_scalar(const FieldName& what) {
    T value;
    read(&value, sizeof(T), what);  // GGUF is little-endian, as is every host Ember targets
    return value;
  }

 private:
  const io::ReadOnlyFile& file_;
  uint64_t position_;
  std::vector<uint8_t> buffer_;
  uint64_t buffer_start_ = 0;  // file offset of buffer_[0]
  uint64_t buffer_fill_ = 0;   // valid bytes in buffer_
};

}  // namespace ember::gguf
