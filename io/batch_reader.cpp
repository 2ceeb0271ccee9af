#include "io/batch_reader.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "io/direct_file.h"
#include "io/io_errors.h"

namespace ember::io {
namespace {

[[noreturn]] void reject(size_t index, const ReadRequest& r, const std::string& problem) {
  std::string msg = "read request ";
  msg += std::to_string(index);
  msg += " ";
  msg += byte_range_text(r.offset, r.length);
  msg += ": ";
  msg += problem;
  throw std::invalid_argument(msg);
}

}  // namespace

std::string describe_failure(const std::string& path, const ReadCompletion& c) {
  std::string msg = path + ": read " + byte_range_text(c.offset, c.length) + " failed: ";
  if (c.result >= 0) return msg + "no failure";
  const int err = static_cast<int>(-c.result);
  if (err == ENODATA) return msg + "the file ends before the wanted bytes (truncated file?)";
  return msg + std::strerror(err);
}

void validate_batch(std::span<const ReadRequest> batch, size_t free_slots, size_t alignment) {
  if (batch.size() > free_slots) {
    throw std::invalid_argument("read batch of " + std::to_string(batch.size()) + " requests exceeds the " +
                                std::to_string(free_slots) + " free slots of the reader");
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const ReadRequest& r = batch[i];
    if (r.length == 0) reject(i, r, "zero length");
    if (r.wanted > r.length) reject(i, r, "wanted bytes exceed the length");
    if (r.dst == nullptr) reject(i, r, "null destination");
    if (r.offset + r.length < r.offset) reject(i, r, "offset + length overflows");
    if (alignment > 1) {
      const uint64_t a = alignment;
      if (r.offset % a != 0 || r.length % a != 0 || reinterpret_cast<uintptr_t>(r.dst) % a != 0) {
        reject(i, r, "offset, length or destination not " + std::to_string(a) + "-aligned on an O_DIRECT file");
      }
    }
  }
}

}  // namespace ember::io
