#pragma once
// The batched read interface: a caller hands over a batch of positioned reads of one file, keeps
// computing, and harvests completions as they arrive. Backends: io_uring (uring_reader.h) and a
// pread thread pool (pread_pool_reader.h); a fault-injecting wrapper (fault_injecting_reader.h)
// for tests of the layers above. Backend selection: io_backend.h.
//
// Short reads. A read may deliver fewer bytes than `length` only where the file ends: requests say
// how many leading bytes they really need (`wanted`), so the last 4 KiB-aligned read of a file
// (O_DIRECT cannot read a partial block) succeeds when the file ends after the wanted bytes. A short
// read before the end of the file (signals, the kernel splitting a large request) is retried for the
// remainder inside the backend, never surfaced. When the file ends before `wanted` bytes, the
// request completes with -ENODATA; describe_failure() turns that into a message naming the offset
// and length.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace ember::io {

struct ReadRequest {
  uint64_t offset = 0;   // file offset (a multiple of DirectFile::alignment() on a direct file)
  uint32_t length = 0;   // bytes to read into dst (a multiple of the alignment on a direct file), > 0
  uint32_t wanted = 0;   // leading bytes that must arrive (<= length); 0 means all of length
  void* dst = nullptr;   // length bytes of room (an address aligned likewise on a direct file)
  uint64_t tag = 0;      // the caller's; returned untouched in the completion
};

struct ReadCompletion {
  uint64_t tag = 0;
  // Bytes delivered (>= the request's wanted bytes, <= length) or -errno. -ENODATA: the file ended
  // before the wanted bytes.
  int64_t result = 0;
  uint64_t offset = 0;   // the request's, for error messages
  uint32_t length = 0;

  bool ok() const { return result >= 0; }
};

// "PATH: read [offset, +length) failed: <reason>" for a failed completion.
std::string describe_failure(const std::string& path, const ReadCompletion& completion);

class BatchReader {
 public:
  virtual ~BatchReader() = default;

  // Validates the whole batch first (throws std::invalid_argument naming the request: zero length,
  // wanted > length, null dst, misalignment on a direct file, more than free_slots() requests), then
  // starts every read. io_uring: one io_uring_submit per batch of at most queue_depth() requests;
  // a bigger batch is submitted in rounds of queue_depth(). Allocates nothing.
  virtual void submit(std::span<const ReadRequest> batch) = 0;

  // Writes finished reads into `out`, in completion order, waiting until at least
  // min(min_complete, in_flight(), out.size()) are there; returns how many were written (at most
  // out.size()). harvest(out, 0) only collects what has already finished. Allocates nothing.
  virtual size_t harvest(std::span<ReadCompletion> out, size_t min_complete) = 0;

  // Submitted and not yet harvested.
  virtual size_t in_flight() const = 0;
  // Most requests in flight at once (preallocated at construction).
  virtual size_t capacity() const = 0;
  size_t free_slots() const { return capacity() - in_flight(); }
  // Requests the backend starts in one go (io_uring: the submission queue size).
  virtual size_t queue_depth() const = 0;
  // "io_uring", "pread", "fault(io_uring)", ...
  virtual std::string backend_name() const = 0;

  // Declares the one memory area that destinations will lie in (e.g. the neuron cache's slots).
  // io_uring registers it as its fixed buffer: reads into it skip the per-read page pinning.
  // Destinations outside it still work (ordinary reads). Only with nothing in flight; replaces an
  // earlier arena. Throws IoError when the kernel refuses (e.g. RLIMIT_MEMLOCK for non-root).
  virtual void register_arena(void* base, size_t bytes) = 0;
};

// Shared by the backends: the request checks submit() makes. `alignment` > 1 (a direct file's
// DirectFile::alignment()) enables the alignment checks of offset, length and destination.
// Throws std::invalid_argument naming the request index and the problem.
void validate_batch(std::span<const ReadRequest> batch, size_t free_slots, size_t alignment);

// The bytes a request needs: wanted, or length when wanted is 0.
inline uint32_t wanted_bytes(const ReadRequest& r) { return r.wanted == 0 ? r.length : r.wanted; }

}  // namespace ember::io
