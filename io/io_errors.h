#pragma once
// The pieces of io/'s error messages shared by its files, so every message reads the same way:
// "PATH: what: strerror" and byte ranges written "[offset, +length)".
#include <fcntl.h>

#include <cstdint>
#include <string>

namespace ember::io {

// Throws IoError("PATH: what[: strerror(err)]"); err 0 adds no system reason.
[[noreturn]] void throw_io_error(const std::string& path, const std::string& what, int err);

// "[offset, +n)"
std::string byte_range_text(uint64_t offset, uint64_t n);

// Add to the flags of every open() of a file that must be regular (models, packs): a FIFO opened
// for reading without it blocks in open() until a writer appears, i.e. forever, and no signal
// handler gets to stop the process; with it the open returns at once and the check below refuses
// the FIFO. regular_file_size_or_close clears the flag again on the files it accepts.
inline constexpr int kOpenNonBlocking = O_NONBLOCK;

// The size of the regular file open at fd, and O_NONBLOCK cleared on it (io_uring honours the flag
// on regular files too: reads would then fail with EAGAIN instead of waiting for the disk). When
// fstat fails or it is not a regular file, closes fd and throws IoError naming the path ("not a
// regular file").
uint64_t regular_file_size_or_close(int fd, const std::string& path);

}  // namespace ember::io
