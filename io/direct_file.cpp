#include "io/direct_file.h"

#include <fcntl.h>
#include <linux/stat.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

// statx through the system call: glibc 2.36's struct statx predates the DIO alignment fields.
uint32_t real_dio_offset_align(int fd) {
#if defined(SYS_statx) && defined(STATX_DIOALIGN)
  struct statx st {};
  if (::syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &st) != 0) return 0;
  if ((st.stx_mask & STATX_DIOALIGN) == 0) return 0;
  return st.stx_dio_offset_align;
#else
  (void)fd;
  return 0;
#endif
}

int open_retrying(const DirectFileSyscalls& sys, const std::string& path, int flags) {
  int fd;
  do {
    fd = sys.open(path.c_str(), flags);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// One aligned read of `bytes` at `offset`: the only reliable test of O_DIRECT, since some file
// systems accept the flag at open and refuse (EINVAL) the reads. Returns 0 or errno.
int probe_direct_read(const DirectFileSyscalls& sys, int fd, uint64_t offset, size_t bytes) {
  AlignedBuffer block(kDirectAlignment, kDirectAlignment);
  for (;;) {
    const ssize_t got = sys.pread(fd, block.data(), bytes, static_cast<off_t>(offset));
    if (got >= 0) return 0;  // a short or empty read is fine: the file may be smaller than a block
    if (errno != EINTR) return errno;
  }
}

// The offset alignment to read a direct file at: what the kernel reports when it is a power of two
// in [512, 4096] and a read of one such block at that offset works (a device may report a size it
// then refuses through some layer), else 4096, which the open probe has already checked.
size_t choose_alignment(const DirectFileSyscalls& sys, int fd) {
  const uint32_t reported = sys.dio_offset_align != nullptr ? sys.dio_offset_align(fd) : 0;
  const bool usable = reported >= kMinDirectAlignment && reported < kDirectAlignment && (reported & (reported - 1)) == 0;
  if (!usable) return kDirectAlignment;
  return probe_direct_read(sys, fd, reported, reported) == 0 ? reported : kDirectAlignment;
}

std::string refused_warning(const std::string& path, const char* where, int err) {
  return path + ": the file system refuses O_DIRECT (" + where + ": " + std::strerror(err) +
         "); reading through the page cache instead, so the kernel may keep read data cached "
         "beyond the memory budget";
}

}  // namespace

DirectFileSyscalls DirectFileSyscalls::real() { return DirectFileSyscalls{&real_open, &real_pread, &real_dio_offset_align}; }

DirectFile::DirectFile(int fd, uint64_t size, bool direct, size_t alignment, std::string path, std::string warning)
    : fd_(fd), size_(size), direct_(direct), alignment_(alignment), path_(std::move(path)), warning_(std::move(warning)) {}

DirectFile DirectFile::open(const std::string& path, DirectMode mode, const DirectFileSyscalls& sys) {
  const int base_flags = O_RDONLY | O_CLOEXEC | kOpenNonBlocking;  // a FIFO must not block the open
  std::string warning;
  int fd = -1;
  bool direct = false;
  size_t alignment = kDirectAlignment;
  uint64_t size = 0;

  if (mode == DirectMode::PreferDirect) {
    fd = open_retrying(sys, path, base_flags | O_DIRECT);
    if (fd >= 0) {
      size = regular_file_size_or_close(fd, path);  // before the probe: a directory would fail it confusingly
      const int err = probe_direct_read(sys, fd, 0, kDirectAlignment);
      if (err == 0) {
        direct = true;
        alignment = choose_alignment(sys, fd);
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
  return DirectFile(fd, size, direct, alignment, path, std::move(warning));
}

DirectFile::DirectFile(DirectFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      size_(std::exchange(other.size_, 0)),
      direct_(std::exchange(other.direct_, false)),
      alignment_(std::exchange(other.alignment_, kDirectAlignment)),
      path_(std::move(other.path_)),
      warning_(std::move(other.warning_)) {}

DirectFile& DirectFile::operator=(DirectFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = std::exchange(other.size_, 0);
    direct_ = std::exchange(other.direct_, false);
    alignment_ = std::exchange(other.alignment_, kDirectAlignment);
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
