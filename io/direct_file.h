#pragma once
// A read-only file opened for O_DIRECT reads when its file system allows them, buffered otherwise.
// O_DIRECT keeps the page cache from quietly holding the model (the memory budget would be a lie
// otherwise); file systems that refuse it (older tmpfs, some FUSE and network file systems) are
// detected and the file is read through the page cache instead, with a warning for the caller to log.
// io/ never prints.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::io {

// Buffer address alignment of every read on a direct file, and the offset and length alignment
// when the kernel does not say a smaller one: 4 KiB covers the logical block size of every common
// device (512 B and 4 KiB sectors) and is the page size.
inline constexpr size_t kDirectAlignment = 4096;
// The smallest offset and length alignment a direct file reads at: a 512-byte logical block.
inline constexpr size_t kMinDirectAlignment = 512;

enum class DirectMode {
  PreferDirect,  // O_DIRECT when the file system allows it, else buffered with a warning
  Buffered,      // always through the page cache (tests, or a caller that wants the page cache)
};

// The system calls DirectFile uses, replaceable so that tests can play a file system that refuses
// O_DIRECT (the machine running the tests may have none).
struct DirectFileSyscalls {
  int (*open)(const char* path, int flags);
  ssize_t (*pread)(int fd, void* buf, size_t n, off_t offset);
  // The file's O_DIRECT offset alignment as the kernel reports it (statx STATX_DIOALIGN, Linux 6.1+),
  // 0 when unknown. Null: unknown.
  uint32_t (*dio_offset_align)(int fd) = nullptr;
  static DirectFileSyscalls real();
};

class DirectFile {
 public:
  // Opens `path` for reading. With PreferDirect: tries O_DIRECT, then probes it with one aligned
  // 4 KiB read at offset 0 (some file systems accept the flag at open and refuse the reads); either
  // failing with EINVAL means "no O_DIRECT here": the file is reopened buffered with
  // posix_fadvise(RANDOM) (neuron reads are scattered: readahead would only read unwanted bytes)
  // and warning() says why. Any other failure throws IoError naming the path.
  static DirectFile open(const std::string& path, DirectMode mode = DirectMode::PreferDirect,
                         const DirectFileSyscalls& sys = DirectFileSyscalls::real());

  DirectFile(DirectFile&& other) noexcept;
  DirectFile& operator=(DirectFile&& other) noexcept;
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;
  ~DirectFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // True when reads bypass the page cache. Then every read's offset, length and destination
  // address must be multiples of alignment().
  bool is_direct() const { return direct_; }
  // 1 on a buffered file. On a direct file the device's logical block size when the kernel reports
  // it (statx) and a probe read at that alignment works, else 4096: a power of two in [512, 4096].
  // A smaller alignment matters for scattered reads: a 6.75 KiB neuron bundle at a 256-byte
  // boundary costs ~7 KiB read at 512-byte alignment against ~10.75 KiB at 4096.
  size_t alignment() const { return direct_ ? alignment_ : 1; }
  // Empty when the file is direct or buffered was asked for; otherwise one line saying that the
  // file system refused O_DIRECT and what that costs, for the caller to log.
  const std::string& warning() const { return warning_; }

  // Reads n bytes at offset into dst, synchronously (for the odd small read outside the batched
  // path), of which the first `wanted` must arrive: the rest may lie past the end of the file (an
  // aligned read of the last block). On a direct file offset, n and dst must be multiples of
  // alignment(). Throws IoError naming the path and range when the wanted bytes are not inside
  // the file or a read fails.
  void read_exact(void* dst, uint64_t n, uint64_t offset, uint64_t wanted) const;

 private:
  DirectFile(int fd, uint64_t size, bool direct, size_t alignment, std::string path, std::string warning);
  int fd_ = -1;
  uint64_t size_ = 0;
  bool direct_ = false;
  size_t alignment_ = kDirectAlignment;
  std::string path_;
  std::string warning_;
};

}  // namespace ember::io
