#include "io/pread_pool_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

#include "io/direct_file.h"
#include "io/read_progress.h"

namespace ember::io {

PreadPoolReader::PreadPoolReader(const DirectFile& file, const PreadPoolOptions& options)
    : fd_(file.fd()), file_size_(file.size()), alignment_(file.alignment()) {
  if (options.threads == 0 || options.capacity == 0) {
    throw std::invalid_argument("PreadPoolReader: threads and capacity must be positive");
  }
  pending_.resize(options.capacity);
  done_.resize(options.capacity);
  workers_.reserve(options.threads);
  try {
    for (uint32_t i = 0; i < options.threads; ++i) workers_.emplace_back([this] { work(); });
  } catch (...) {
    // A thread could not be started: the destructor will not run, and destroying the joinable
    // threads already started would std::terminate. Stop them here.
    stop_workers();
    throw;
  }
}

PreadPoolReader::~PreadPoolReader() { stop_workers(); }

void PreadPoolReader::stop_workers() noexcept {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    // Reads not yet started are dropped; those being read finish before their thread exits, so no
    // thread writes into the caller's buffers after the destructor returns.
    pending_count_ = 0;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void PreadPoolReader::register_arena(void* /*base*/, size_t /*bytes*/) {
  if (in_flight_ > 0) throw std::logic_error("PreadPoolReader::register_arena with reads in flight");
}

void PreadPoolReader::submit(std::span<const ReadRequest> batch) {
  validate_batch(batch, free_slots(), alignment_);
  if (batch.empty()) return;
  {
    std::lock_guard lock(mu_);
    for (const ReadRequest& r : batch) {
      pending_[(pending_head_ + pending_count_) % pending_.size()] = r;
      ++pending_count_;
    }
  }
  in_flight_ += batch.size();
  if (batch.size() == 1) work_cv_.notify_one();
  else work_cv_.notify_all();
}

size_t PreadPoolReader::harvest(std::span<ReadCompletion> out, size_t min_complete) {
  const size_t need = std::min({min_complete, in_flight_, out.size()});
  std::unique_lock lock(mu_);
  caller_needs_ = std::max<size_t>(need, 1);
  done_cv_.wait(lock, [&] { return done_count_ >= need; });
  const size_t n = std::min(done_count_, out.size());
  for (size_t i = 0; i < n; ++i) {
    out[i] = done_[done_head_];
    done_head_ = (done_head_ + 1) % done_.size();
  }
  done_count_ -= n;
  lock.unlock();
  in_flight_ -= n;
  return n;
}

void PreadPoolReader::work() {
  ReadRequest r;
  bool have = false;  // a request taken in the same lock hold that posted the previous completion
  for (;;) {
    if (!have) {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || pending_count_ > 0; });
      if (stopping_) return;
      r = pending_[pending_head_];
      pending_head_ = (pending_head_ + 1) % pending_.size();
      --pending_count_;
    }
    ReadProgress progress;
    int64_t result = 0;
    auto* dst = static_cast<uint8_t*>(r.dst);
    for (;;) {
      const ssize_t got = ::pread(fd_, dst + progress.done, r.length - progress.done,
                                  static_cast<off_t>(r.offset + progress.done));
      const int64_t got_or_error = got < 0 ? -static_cast<int64_t>(errno) : static_cast<int64_t>(got);
      if (advance_read(r, progress, got_or_error, file_size_, &result) != ReadStep::Retry) break;
    }
    bool wake_caller = false;
    {
      std::lock_guard lock(mu_);
      // Never overflows: at most capacity requests are in flight, queued or done.
      done_[(done_head_ + done_count_) % done_.size()] = ReadCompletion{r.tag, result, r.offset, r.length};
      ++done_count_;
      // Wake the caller only once it has what it waits for: each wake-up costs a context switch,
      // which on a small machine is as dear as a read.
      wake_caller = done_count_ >= caller_needs_;
      // Take the next request while holding the lock anyway: one lock round trip per read.
      have = !stopping_ && pending_count_ > 0;
      if (have) {
        r = pending_[pending_head_];
        pending_head_ = (pending_head_ + 1) % pending_.size();
        --pending_count_;
      }
    }
    if (wake_caller) done_cv_.notify_one();
  }
}
}  // namespace ember::io
