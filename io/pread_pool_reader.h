#pragma once
// BatchReader on a pool of threads calling pread: for systems where io_uring is missing or blocked
// (Android apps run under a seccomp policy that forbids it). N threads give N reads in flight, so
// the device still sees a queue; each read costs a system call and a thread wake-up.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "io/batch_reader.h"

namespace ember::io {

class DirectFile;

struct PreadPoolOptions {
  uint32_t threads = 16;    // concurrent reads (see ReaderOptions::pread_threads)
  uint32_t capacity = 256;  // most requests in flight (queued or being read)
};

class PreadPoolReader final : public BatchReader {
 public:
  // `file` must outlive the reader. Throws std::invalid_argument for zero sizes.
  PreadPoolReader(const DirectFile& file, const PreadPoolOptions& options = {});
  ~PreadPoolReader() override;  // finishes the reads already started, then stops the threads
  PreadPoolReader(const PreadPoolReader&) = delete;
  PreadPoolReader& operator=(const PreadPoolReader&) = delete;

  void submit(std::span<const ReadRequest> batch) override;
  size_t harvest(std::span<ReadCompletion> out, size_t min_complete) override;
  size_t in_flight() const override { return in_flight_; }
  size_t capacity() const override { return pending_.size(); }
  size_t queue_depth() const override { return workers_.size(); }
  std::string backend_name() const override { return "pread"; }
  // Nothing to register for pread; accepted so that callers need not care about the backend.
  void register_arena(void* base, size_t bytes) override;

 private:
  void work();
  void stop_workers() noexcept;  // ends and joins the threads (reads being made finish first)

  int fd_ = -1;
  uint64_t file_size_ = 0;
  size_t alignment_ = 1;  // the file's: 1 when buffered
  size_t in_flight_ = 0;  // touched by the caller's thread only (submit/harvest)

  std::mutex mu_;
  std::condition_variable work_cv_;  // workers: requests queued or stopping
  std::condition_variable done_cv_;  // caller: completions added
  // Fixed-size rings (capacity entries each): nothing is allocated per request.
  std::vector<ReadRequest> pending_;
  size_t pending_head_ = 0, pending_count_ = 0;
  std::vector<ReadCompletion> done_;
  size_t done_head_ = 0, done_count_ = 0;
  size_t caller_needs_ = 1;  // completions the caller waits for in harvest (wake it only then)
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace ember::io
