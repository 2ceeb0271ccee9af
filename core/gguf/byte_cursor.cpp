#include "core/gguf/byte_cursor.h"

#include <algorithm>

#include "core/gguf/gguf_value.h"

namespace ember::gguf {

ByteCursor::ByteCursor(const io::ReadOnlyFile& file, uint64_t start, size_t buffer_bytes)
    : file_(file), position_(std::min(start, file.size())), buffer_(std::max<size_t>(buffer_bytes, 64)) {}

void ByteCursor::read(void* dst, uint64_t n, const FieldName& what) {
  if (n > remaining()) {
    throw GgufError("unexpected end of file reading " + what.str() + " at offset " + std::to_string(position_) +
                    ": needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left");
  }
  auto* out = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const bool in_buffer = position_ >= buffer_start_ && position_ < buffer_start_ + buffer_fill_;
    if (!in_buffer) {
      if (n >= buffer_.size()) {  // a large read gains nothing from the buffer: read it directly
        file_.read_exact(out, n, position_);
        position_ += n;
        return;
      }
      buffer_start_ = position_;
      buffer_fill_ = std::min<uint64_t>(buffer_.size(), remaining());
      file_.read_exact(buffer_.data(), buffer_fill_, buffer_start_);
    }
    const uint64_t available = buffer_start_ + buffer_fill_ - position_;
    const uint64_t take = std::min(n, available);
    std::memcpy(out, buffer_.data() + (position_ - buffer_start_), static_cast<size_t>(take));
    out += take;
    position_ += take;
    n -= take;
  }
}

}  // namespace ember::gguf
