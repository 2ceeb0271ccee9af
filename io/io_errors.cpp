#include "io/io_errors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/file.h"

namespace ember::io {

void throw_io_error(const std::string& path, const std::string& what, int err) {
  std::string msg = path + ": " + what;
  if (err != 0) msg += std::string(": ") + std::strerror(err);
  throw IoError(msg);
}

std::string byte_range_text(uint64_t offset, uint64_t n) {
  // Appended piecewise: g++ 12 warns falsely (-Wrestrict) on "literal" + std::to_string(...).
  std::string text = "[";
  text += std::to_string(offset);
  text += ", +";
  text += std::to_string(n);
  text += ")";
  return text;
}

uint64_t regular_file_size_or_close(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_io_error(path, "fstat failed", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_io_error(path, "not a regular file", 0);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ((flags & O_NONBLOCK) != 0 && ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)) {
    const int err = errno;
    ::close(fd);
    throw_io_error(path, "fcntl failed", err);
  }
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace ember::io
