#pragma once
// Files as io/ sees them: a read-only file with exact positioned reads, a read-only memory map of a
// byte range, and buffers aligned for O_DIRECT. io/ knows files, offsets and buffers, never models.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace ember::io {

// Any failure of the operating system or a short read; the message names the path, the operation,
// the offset and length, and strerror.
class IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ReadOnlyFile {
 public:
  // Opens for reading (buffered). Throws IoError naming the path when it cannot be opened or is not
  // a regular file.
  static ReadOnlyFile open(const std::string& path);

  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile();

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

  // Reads exactly n bytes at offset (pread loop, EINTR-safe). Throws IoError when [offset, offset+n)
  // is not inside the file or the read comes back short. Thread-safe (pread has no shared cursor).
  void read_exact(void* dst, uint64_t n, uint64_t offset) const;

 private:
  ReadOnlyFile(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// A read-only, private mapping of [offset, offset+length) of a file. The mapping itself starts at
// the page below offset; data() points at offset. Unmapped on destruction.
class MappedRegion {
 public:
  static MappedRegion map(const ReadOnlyFile& file, uint64_t offset, uint64_t length);

  MappedRegion() = default;
  MappedRegion(MappedRegion&& other) noexcept;
  MappedRegion& operator=(MappedRegion&& other) noexcept;
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  ~MappedRegion();

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

  // Gives the mapped pages back (madvise DONTNEED) and asks the kernel to drop them from the page
  // cache (posix_fadvise DONTNEED on `file` from file_offset, the offset map() was given): for data
  // that was read once (e.g. copied into a repacked layout) and must not count against a memory
  // budget. The mapping stays valid: a later access reads the pages in again. Best effort.
  void release_pages(const ReadOnlyFile& file, uint64_t file_offset) const;

  // Page faults on this mapping read exactly the region, no more: MADV_RANDOM (no fault-around
  // readahead, which on a disk with an 8 MiB read_ahead_kb drags in megabytes of whatever lies next
  // to a tensor in the file) and MADV_WILLNEED (read the region itself ahead, in large requests).
  // For data that is read once under a memory budget. Best effort.
  void read_only_this() const;

 private:
  void* base_ = nullptr;
  uint64_t base_length_ = 0;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// Asks the kernel to drop `file`'s clean cached pages in [offset, offset + length) (length 0: to the
// end); pages mapped by a process stay. posix_fadvise(DONTNEED); best effort.
void drop_cached_pages(const ReadOnlyFile& file, uint64_t offset = 0, uint64_t length = 0);

// Memory aligned to `alignment` (a power of two, default 4 KiB for O_DIRECT), zero-filled.
// Buffers of kHugePageBytes or more are anonymous mappings aligned to 2 MiB and marked
// MADV_HUGEPAGE before anything touches them, so the kernel can back them with transparent huge
// pages (with THP in "madvise" mode only such marked memory gets them, and memory touched before
// the advice stays in small pages). The model's big arrays live here: repacked matrices, bundles
// read into memory, the neuron cache. Fewer TLB misses on the sparse FFN's random ~7 KB bundle
// reads: +7 % decode tok/s on the mistral-7b pack (dev VM, back-to-back pairs). Best effort: where
// THP is off the mapping is ordinary memory.
class AlignedBuffer {
 public:
  static constexpr size_t kHugePageBytes = size_t{2} << 20;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes, size_t alignment = 4096);
  uint8_t* data() { return ptr_.get(); }
  const uint8_t* data() const { return ptr_.get(); }
  size_t size() const { return size_; }
  // Whether the buffer is a huge-page-advised mapping (not whether the kernel granted huge pages).
  bool huge_page_advised() const { return ptr_.get_deleter().mapped_bytes != 0; }

 private:
  struct Free {
    // User-provided constructors: a default member initializer would leave Free not yet default
    // constructible inside the incomplete AlignedBuffer, which unique_ptr's constructors need.
    Free() noexcept : mapped_bytes(0) {}
    explicit Free(size_t mapped) noexcept : mapped_bytes(mapped) {}
    size_t mapped_bytes;  // 0: from posix_memalign; else the length of the anonymous mapping
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> ptr_;
  size_t size_ = 0;
};

}  // namespace ember::io
