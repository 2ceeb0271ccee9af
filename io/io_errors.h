#pragma once
// The pieces of io/'s error messages shared by its files, so every message reads the same way:
// "PATH: what: strerror" and byte ranges written "[offset, +length)".
#include <cstdint>
#include <string>

namespace ember::io {

// Throws IoError("PATH: what[: strerror(err)]"); err 0 adds no system reason.
[[noreturn]] void throw_io_error(const std::string& path, const std::string& what, int err);

// "[offset, +n)"
std::string byte_range_text(uint64_t offset, uint64_t n);

// The size of the regular file open at fd. When fstat fails or it is not a regular file, closes fd
// and throws IoError naming the path.
uint64_t regular_file_size_or_close(int fd, const std::string& path);

}  // namespace ember::io
