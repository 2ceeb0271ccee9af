#include "io/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <utility>

#include "io/io_errors.h"

namespace ember::io {
namespace {

uint64_t page_size() {
  const long p = ::sysconf(_SC_PAGESIZE);
  return p > 0 ? static_cast<uint64_t>(p) : 4096;
}

}  // namespace

// ---- ReadOnlyFile ---------------------------------------------------------------------------------

ReadOnlyFile ReadOnlyFile::open(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | kOpenNonBlocking);  // a FIFO must not block here
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_io_error(path, "cannot open for reading", errno);

  const uint64_t size = regular_file_size_or_close(fd, path);
  return ReadOnlyFile(fd, size, path);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(std::exchange(other.size_, 0)), path_(std::move(other.path_)) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ReadOnlyFile::read_exact(void* dst, uint64_t n, uint64_t offset) const {
  // Written as a subtraction so that offset + n can never wrap.
  if (offset > size_ || n > size_ - offset) {
    throw_io_error(path_, "read " + byte_range_text(offset, n) + " is outside the file of " + std::to_string(size_) + " bytes", 0);
  }
  auto* out = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  // pread may return less than asked (signals, >2 GiB requests on Linux), so loop until complete.
  constexpr uint64_t kMaxChunk = 1ull << 30;
  while (done < n) {
    const uint64_t want = std::min(n - done, kMaxChunk);
    const ssize_t got = ::pread(fd_, out + done, static_cast<size_t>(want), static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw_io_error(path_, "pread " + byte_range_text(offset + done, want) + " failed", errno);
    }
    if (got == 0) {
      throw_io_error(path_, "short read " + byte_range_text(offset, n) + ": end of file after " + std::to_string(done) +
                      " bytes (file shrank while open?)",
           0);
    }
    done += static_cast<uint64_t>(got);
  }
}

// ---- MappedRegion ---------------------------------------------------------------------------------

MappedRegion MappedRegion::map(const ReadOnlyFile& file, uint64_t offset, uint64_t length) {
  if (offset > file.size() || length > file.size() - offset) {
    throw_io_error(file.path(), "mmap " + byte_range_text(offset, length) + " is outside the file of " +
                          std::to_string(file.size()) + " bytes",
         0);
  }
  MappedRegion region;
  if (length == 0) return region;  // mmap rejects empty mappings; an empty region needs none

  // mmap wants a page-aligned file offset: start at the page below and point data() past the slack.
  const uint64_t page = page_size();
  const uint64_t base_offset = offset - offset % page;
  const uint64_t slack = offset - base_offset;
  const uint64_t base_length = length + slack;  // cannot wrap: both are bounded by the file size
  if (base_length > std::numeric_limits<size_t>::max()) {
    throw_io_error(file.path(), "mmap " + byte_range_text(offset, length) + " does not fit the address space", 0);
  }
  void* base = ::mmap(nullptr, static_cast<size_t>(base_length), PROT_READ, MAP_PRIVATE, file.fd(),
                      static_cast<off_t>(base_offset));
  if (base == MAP_FAILED) throw_io_error(file.path(), "mmap " + byte_range_text(offset, length) + " failed", errno);

  region.base_ = base;
  region.base_length_ = base_length;
  region.data_ = static_cast<const uint8_t*>(base) + slack;
  region.size_ = length;
  return region;
}

MappedRegion::MappedRegion(MappedRegion&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      base_length_(std::exchange(other.base_length_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedRegion& MappedRegion::operator=(MappedRegion&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) ::munmap(base_, static_cast<size_t>(base_length_));
    base_ = std::exchange(other.base_, nullptr);
    base_length_ = std::exchange(other.base_length_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedRegion::release_pages(const ReadOnlyFile& file, uint64_t file_offset) const {
  if (base_ == nullptr) return;
  ::madvise(base_, static_cast<size_t>(base_length_), MADV_DONTNEED);
  const uint64_t slack = static_cast<uint64_t>(data_ - static_cast<const uint8_t*>(base_));
  ::posix_fadvise(file.fd(), static_cast<off_t>(file_offset - slack), static_cast<off_t>(base_length_),
                  POSIX_FADV_DONTNEED);
}

void MappedRegion::read_only_this() const {
  if (base_ == nullptr) return;
  ::madvise(base_, static_cast<size_t>(base_length_), MADV_RANDOM);
  ::madvise(base_, static_cast<size_t>(base_length_), MADV_WILLNEED);
}

void drop_cached_pages(const ReadOnlyFile& file, uint64_t offset, uint64_t length) {
  ::posix_fadvise(file.fd(), static_cast<off_t>(offset), static_cast<off_t>(length), POSIX_FADV_DONTNEED);
}

MappedRegion::~MappedRegion() {
  if (base_ != nullptr) ::munmap(base_, static_cast<size_t>(base_length_));
}

// ---- AlignedBuffer --------------------------------------------------------------------------------

AlignedBuffer::AlignedBuffer(size_t bytes, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment < sizeof(void*)) {
    throw std::invalid_argument("AlignedBuffer: alignment " + std::to_string(alignment) +
                                " is not a power of two of at least pointer size");
  }
  if (bytes == 0) return;
  if (bytes >= kHugePageBytes && alignment <= kHugePageBytes && bytes <= SIZE_MAX - 2 * kHugePageBytes) {
    // 2 MiB-aligned: map 2 MiB more than needed and trim both ends. The length is not rounded up
    // to whole huge pages: the tail past the last whole one stays in small pages rather than
    // costing up to 2 MiB per buffer (a 7B model has ~200 repacked matrices).
    const size_t small_page = static_cast<size_t>(page_size());
    const size_t length = (bytes + small_page - 1) / small_page * small_page;
    const size_t padded = length + kHugePageBytes;
    void* m = ::mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) {  // else fall through: posix_memalign reports the failure
      auto* raw = static_cast<uint8_t*>(m);
      const size_t head = (kHugePageBytes - reinterpret_cast<uintptr_t>(raw) % kHugePageBytes) % kHugePageBytes;
      if (head > 0) ::munmap(raw, head);
      if (padded - head - length > 0) ::munmap(raw + head + length, padded - head - length);
      uint8_t* p = raw + head;
      // Before the first touch: memory already faulted in as small pages stays small until
      // khugepaged gets to it. Advice only: EINVAL where THP is compiled out; fresh anonymous
      // memory is zero-filled either way.
      ::madvise(p, length, MADV_HUGEPAGE);
      ptr_ = std::unique_ptr<uint8_t, Free>(p, Free{length});
      size_ = bytes;
      return;
    }
  }
  // posix_memalign rather than aligned_alloc: the latter requires size to be a multiple of alignment.
  void* p = nullptr;
  const int rc = ::posix_memalign(&p, alignment, bytes);
  if (rc != 0) {
    throw IoError("AlignedBuffer: cannot allocate " + std::to_string(bytes) + " bytes aligned to " +
                  std::to_string(alignment) + ": " + std::strerror(rc));
  }
  std::memset(p, 0, bytes);
  ptr_.reset(static_cast<uint8_t*>(p));
  size_ = bytes;
}

void AlignedBuffer::Free::operator()(uint8_t* p) const {
  if (mapped_bytes != 0) {
    ::munmap(p, mapped_bytes);
  } else {
    std::free(p);
  }
}

}  // namespace ember::io
