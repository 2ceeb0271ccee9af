#pragma once
// Test helpers: a raw little-endian byte builder for hand-made (and deliberately broken) GGUF
// files, a temporary file that removes itself, and a one-call "open this and give me the error".
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf/gguf_file.h"

namespace ember::test {

class GgufBytes {
 public:
  explicit GgufBytes(uint32_t version = 3) : version_(version) {}

  std::string bytes;

  template <typename T>
  GgufBytes& put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  GgufBytes& u8(uint8_t v) { return put(v); }
  GgufBytes& u32(uint32_t v) { return put(v); }
  GgufBytes& u64(uint64_t v) { return put(v); }
  // Counts, string lengths and dims: 32 bits in v1, 64 otherwise.
  GgufBytes& count(uint64_t v) { return version_ == 1 ? u32(static_cast<uint32_t>(v)) : u64(v); }
  GgufBytes& str(std::string_view s) {
    count(s.size());
    bytes.append(s);
    return *this;
  }
  GgufBytes& raw(std::string_view s) {
    bytes.append(s);
    return *this;
  }
  GgufBytes& zeros(uint64_t n) {
    bytes.append(n, '\0');
    return *this;
  }
  GgufBytes& pad_to(uint64_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back('\0');
    return *this;
  }

  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, std::string_view magic = "GGUF") {
    raw(magic);
    u32(version_);
    count(n_tensors);
    return count(n_kv);
  }
  GgufBytes& kv_u32(std::string_view key, uint32_t v) {
    str(key);
    u32(4);  // UINT32
    return u32(v);
  }
  GgufBytes& kv_string(std::string_view key, std::string_view v) {
    str(key);
    u32(8);  // STRING
    return str(v);
  }
  GgufBytes& tensor_info(std::string_view name, const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset) {
    str(name);
    u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) count(n);
    u32(type);
    return u64(offset);
  }

 private:
  uint32_t version_;
};

// A file under the temp directory holding the given bytes; removed on destruction.
class TempFile {
 public:
  explicit TempFile(std::string_view contents = {}) {
    std::string pattern = (std::filesystem::temp_directory_path() / "ember_test_XXXXXX").string();
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    path_ = pattern;
    size_t done = 0;
    while (done < contents.size()) {
      const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
      if (n <= 0) {
        ::close(fd);
        throw std::runtime_error("write to temp file failed");
      }
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Opens the bytes as a GGUF file: "" when it opens, else the GgufError message. Any other exception
// type escapes and fails the test, since hostile input must end in a GgufError.
inline std::string gguf_open_error(const std::string& bytes, const gguf::ReadLimits& limits = {}) {
  TempFile file(bytes);
  try {
    gguf::GgufFile::open(file.path(), limits);
  } catch (const gguf::GgufError& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace ember::test
