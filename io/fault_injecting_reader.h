#pragma once
// A BatchReader that wraps another and injects failures, for testing the layers above (the neuron
// cache must surface an I/O error for the request that hit it and stay consistent). Reads are
// numbered from 0 in submission order across all batches since construction.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "io/batch_reader.h"

namespace ember::io {

struct FaultPlan {
  int64_t fail_nth = -1;  // this read fails with -fail_errno without reaching the file (-1: off)
  int fail_errno = EIO;
  // These reads deliver only short_bytes bytes, as if the file ended there: the destination gets
  // that many bytes and the completion says -ENODATA, or succeeds with short_bytes when that covers
  // the request's wanted bytes. On a direct file short_bytes must be a multiple of 4096.
  int64_t short_nth = -1;    // one read (-1: off)
  bool short_every = false;  // every read
  uint32_t short_bytes = 0;
  // Every read overlapping [range_begin, range_end) fails with -range_errno (an empty range: off),
  // like a bad region of the device.
  uint64_t range_begin = 0, range_end = 0;
  int range_errno = EIO;
};

class FaultInjectingReader final : public BatchReader {
 public:
  explicit FaultInjectingReader(std::unique_ptr<BatchReader> inner, const FaultPlan& plan = {});

  // Takes effect for reads submitted from now on; the read numbering is not reset.
  void set_plan(const FaultPlan& plan) { plan_ = plan; }
  uint64_t reads_submitted() const { return next_read_; }
  BatchReader& inner() { return *inner_; }

  void submit(std::span<const ReadRequest> batch) override;
  size_t harvest(std::span<ReadCompletion> out, size_t min_complete) override;
  size_t in_flight() const override { return inner_->in_flight() + ready_count_; }
  size_t capacity() const override { return inner_->capacity(); }
  size_t queue_depth() const override { return inner_->queue_depth(); }
  std::string backend_name() const override { return "fault(" + inner_->backend_name() + ")"; }
  void register_arena(void* base, size_t bytes) override { inner_->register_arena(base, bytes); }

 private:
  struct Slot {
    uint64_t tag = 0;
    uint32_t wanted = 0;  // the caller's wanted bytes
    uint64_t offset = 0;
    uint32_t length = 0;
  };

  std::unique_ptr<BatchReader> inner_;
  FaultPlan plan_;
  uint64_t next_read_ = 0;
  // Preallocated to the inner capacity: nothing is allocated per request.
  std::vector<Slot> slots_;               // per request passed to the inner reader; inner tag = index
  std::vector<uint32_t> free_;            // free slot indices
  std::vector<ReadRequest> scratch_;      // the batch as passed on
  std::vector<ReadCompletion> ready_;     // injected failures, harvested before the inner reader's
  size_t ready_head_ = 0, ready_count_ = 0;
};

}  // namespace ember::io
