#pragma once
// BatchReader on io_uring (liburing): one io_uring_submit per batch, the file registered
// (IOSQE_FIXED_FILE: no file-table lookup per read) and the destination arena registered as fixed
// buffers (READ_FIXED: no page pinning per read). Completions are harvested from the completion
// queue as they arrive.
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/batch_reader.h"
#include "io/read_progress.h"

struct io_uring;  // liburing's ring; kept out of this header so users need not see liburing

namespace ember::io {

class DirectFile;

struct UringOptions {
  uint32_t queue_depth = 32;  // submission queue entries (rounded up to a power of two by the kernel)
  uint32_t capacity = 256;    // most requests in flight; the completion queue is sized to hold them all
  // The kernel takes fixed buffers of at most 1 GiB each, so the arena is registered as consecutive
  // chunks of this size; a read that straddles two chunks falls back to an ordinary read. Smaller
  // values only for tests. A multiple of 4096.
  uint64_t fixed_buffer_chunk = 1ull << 30;
};

class UringReader final : public BatchReader {
 public:
  // Empty when io_uring works here (ring set up, READ and READ_FIXED supported, a NOP submitted and
  // completed); otherwise why not, e.g. "io_uring_queue_init: Function not implemented (ENOSYS:
  // the kernel has no io_uring)". Seccomp policies make setup fail with EPERM, or kill the caller
  // with SIGSYS: the setup call is therefore first made in a forked child (see the .cpp).
  static std::string unavailable_reason();

  // `file` must outlive the reader. Throws IoError when io_uring cannot be set up,
  // std::invalid_argument for zero sizes.
  UringReader(const DirectFile& file, const UringOptions& options = {});
  ~UringReader() override;  // waits for reads in flight: their destinations belong to the caller
  UringReader(const UringReader&) = delete;
  UringReader& operator=(const UringReader&) = delete;

  void submit(std::span<const ReadRequest> batch) override;
  size_t harvest(std::span<ReadCompletion> out, size_t min_complete) override;
  size_t in_flight() const override { return in_flight_; }
  size_t capacity() const override { return slots_.size(); }
  size_t queue_depth() const override { return queue_depth_; }
  std::string backend_name() const override { return "io_uring"; }
  void register_arena(void* base, size_t bytes) override;

  // For tests and stats: whether the file is registered and how many reads went to fixed buffers.
  bool file_registered() const { return file_index_ >= 0; }
  uint64_t fixed_reads() const { return fixed_reads_; }

 private:
  struct Slot {
    ReadRequest request;
    ReadProgress progress;
  };
  void queue_read(uint32_t slot);  // prepares the SQE for the slot's remaining bytes
  void submit_queued();

  std::unique_ptr<::io_uring> ring_;
  int fd_ = -1;
  int file_index_ = -1;  // 0 when registered
  uint64_t file_size_ = 0;
  size_t alignment_ = 1;  // the file's: 1 when buffered
  size_t queue_depth_ = 0;
  uint64_t chunk_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;  // stack of free slot indices
  size_t in_flight_ = 0;
  size_t queued_ = 0;  // SQEs prepared but not yet submitted
  uint8_t* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::vector<iovec> arena_chunks_;
  uint64_t fixed_reads_ = 0;
};

}  // namespace ember::io
