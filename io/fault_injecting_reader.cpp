#include "io/fault_injecting_reader.h"

#include <algorithm>
#include <stdexcept>

namespace ember::io {

FaultInjectingReader::FaultInjectingReader(std::unique_ptr<BatchReader> inner, const FaultPlan& plan)
    : inner_(std::move(inner)), plan_(plan) {
  if (!inner_) throw std::invalid_argument("FaultInjectingReader: no inner reader");
  const size_t cap = inner_->capacity();
  slots_.resize(cap);
  free_.reserve(cap);
  for (size_t i = cap; i-- > 0;) free_.push_back(static_cast<uint32_t>(i));
  scratch_.resize(cap);
  ready_.resize(cap);
}

void FaultInjectingReader::submit(std::span<const ReadRequest> batch) {
  // The general checks (zero length, null destination, room); the inner reader checks alignment.
  validate_batch(batch, free_slots(), 1);
  // Decide everything first and commit after the inner reader accepted the batch, so a rejected
  // batch leaves no trace.
  size_t passed = 0, injected = 0;
  const size_t free_before = free_.size();
  for (size_t i = 0; i < batch.size(); ++i) {
    const ReadRequest& r = batch[i];
    const int64_t n = static_cast<int64_t>(next_read_ + i);
    int err = 0;
    if (n == plan_.fail_nth) err = plan_.fail_errno;
    else if (plan_.range_begin < plan_.range_end && r.offset < plan_.range_end && r.offset + r.length > plan_.range_begin)
      err = plan_.range_errno;
    const bool make_short = err == 0 && (plan_.short_every || n == plan_.short_nth);
    if (make_short && plan_.short_bytes == 0) err = ENODATA;  // nothing delivered: the file "ends" at offset
    if (err != 0) {
      ready_[(ready_head_ + ready_count_ + injected) % ready_.size()] = ReadCompletion{r.tag, -static_cast<int64_t>(err), r.offset, r.length};
      ++injected;
      continue;
    }
    const uint32_t index = free_[free_before - 1 - passed];
    slots_[index] = Slot{r.tag, wanted_bytes(r), r.offset, r.length};
    ReadRequest passed_on = r;
    passed_on.tag = index;
    if (make_short && plan_.short_bytes < r.length) {
      passed_on.length = plan_.short_bytes;
      passed_on.wanted = std::min(wanted_bytes(r), plan_.short_bytes);
    }
    scratch_[passed++] = passed_on;
  }
  inner_->submit(std::span<const ReadRequest>(scratch_.data(), passed));  // may throw: nothing committed yet
  free_.resize(free_before - passed);
  ready_count_ += injected;
  next_read_ += batch.size();
}

size_t FaultInjectingReader::harvest(std::span<ReadCompletion> out, size_t min_complete) {
  const size_t need = std::min({min_complete, in_flight(), out.size()});
  size_t n = 0;
  while (ready_count_ > 0 && n < out.size()) {
    out[n++] = ready_[ready_head_];
    ready_head_ = (ready_head_ + 1) % ready_.size();
    --ready_count_;
  }
  const size_t got = inner_->harvest(out.subspan(n), need > n ? need - n : 0);
  for (size_t i = n; i < n + got; ++i) {
    ReadCompletion& c = out[i];
    const auto index = static_cast<uint32_t>(c.tag);
    const Slot& slot = slots_[index];
    // A read the plan shortened delivers fewer bytes than the caller wanted: a truncated file.
    if (c.result >= 0 && static_cast<uint64_t>(c.result) < slot.wanted) c.result = -ENODATA;
    c.tag = slot.tag;
    c.offset = slot.offset;
    c.length = slot.length;
    free_.push_back(index);
  }
  return n + got;
}

}  // namespace ember::io
