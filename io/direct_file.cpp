#include "io/direct_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "io/file.h"
#include "io/io_errors.h"

namespace ember::io {
namespace {

int real_open(const char* path, int flags) { return ::open(path, flags); }
ssize_t real_pread(int fd, void* buf, size_t n, off_t offset) { return ::pread(fd, buf, n, offset); }

int open_retrying(const DirectFileSyscalls& sys, const std::string& path, int flags) {
  int fd;
  do {
    fd = sys.open(path.c_str(), flags);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// One aligned read of a block at offset 0: the only reliable test of O_DIRECT, since some file
// systems accept the flag at open and refuse (EINVAL) the reads. Returns 0 or errno.
int probe_direct_read(const DirectFileSyscalls& sys, int fd) {
  AlignedBuffer block(kDirectAlignment, kDirectAlignment);
  for (;;) {
    const ssize_t got = sys.pread(fd, block.data(), kDirectAlignment, 0);
    if (got >= 0) return 0;  // a short or empty read is fine: the file may be smaller than a block
    if (errno != EINTR) return errno;
  }
}

std::string refused_warning(const std::string& path, const char* where, int err) {
  return path + ": the file system refuses O_DIRECT (" + where + ": " + std::strerror(err) +
         "); reading through the page cache instead, so the kernel may keep read data cached "
         "beyond the memory budget";
}

}  // namespace

DirectFileSyscalls DirectFileSyscalls::real() { return DirectFileSyscalls{&real_open, &real_pread}; }

DirectFile::DirectFile(int fd, uint64_t size, bool direct, std::string path, std::string warning)
    : fd_(fd), size_(size), direct_(direct), path_(std::move(path)), warning_(std::move(warning)) {}

DirectFile DirectFile::open(const std::string& path, DirectMode mode, const DirectFileSyscalls& sys) {
  const int base_flags = O_RDONLY | O_CLOEXEC;
  std::string warning;
  int fd = -1;
  bool direct = false;
  uint64_t size = 0;

  if (mode == DirectMode::PreferDirect) {
    fd = open_retrying(sys, path, base_flags | O_DIRECT);
    if (fd >= 0) {
      size = regular_file_size_or_close(fd, path);  // before the probe: a directory would fail it confusingly
      const int err = probe_direct_read(sys, fd);
      if (err == 0) {
        direct = true;
      } else {
        ::close(fd);
        fd = -1;
        if (err != EINVAL) throw_io_error(path, "O_DIRECT probe read of the first block failed", err);
        warning = refused_warning(path, "probe read", err);
      }
    } else if (errno == EINVAL) {
      warning = refused_warning(path, "open", EINVAL);
    } else {
      throw_io_error(path, "cannot open for reading", errno);
    }
  }

  if (!direct) {
    fd = open_retrying(sys, path, base_flags);
    if (fd < 0) throw_io_error(path, "cannot open for reading", errno);
    size = regular_file_size_or_close(fd, path);
    // Neuron reads are scattered: readahead would fill the page cache with unwanted neighbours.
    // Advice only; a failure changes nothing that matters.
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  }
  return DirectFile(fd, size, direct, path, std::move(warning));
}

DirectFile::DirectFile(DirectFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      size_(std::exchange(other.size_, 0)),
      direct_(std::exchange(other.direct_, false)),
      path_(std::move(other.path_)),
      warning_(std::move(other.warning_)) {}

DirectFile& DirectFile::operator=(DirectFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = std::exchange(other.size_, 0);
    direct_ = std::exchange(other.direct_, false);
    path_ = std::move(other.path_);
    warning_ = std::move(other.warning_);
  }
  return *this;
}

DirectFile::~DirectFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DirectFile::read_exact(void* dst, uint64_t n, uint64_t offset, uint64_t wanted) const {
  if (wanted > n || offset > size_ || wanted > size_ - offset) {
    throw_io_error(path_, "read " + byte_range_text(offset, wanted) + " is outside the file of " + std::to_string(size_) + " bytes", 0);
  }
  auto* out = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, out + done, static_cast<size_t>(n - done), static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_io_error(path_, "read " + byte_range_text(offset, n) + " failed", errno);
    if (got == 0) break;  // the end of the file
    done += static_cast<uint64_t>(got);
  }
  if (done < wanted) throw_io_error(path_, "read " + byte_range_text(offset, wanted) + " came back short", 0);
}

}  // namespace ember::io
