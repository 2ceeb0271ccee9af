#include "core/cache/bundle_fetcher.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "core/util/align.h"
#include "core/util/clock.h"
#include "io/direct_file.h"
#include "io/file.h"

namespace ember::cache {
namespace {

constexpr uint64_t kStagingAlignment = io::kDirectAlignment;
constexpr uint64_t kDefaultStagingCap = 16ull << 20;

int latency_bucket(int64_t ns) {
  uint64_t us = ns > 0 ? static_cast<uint64_t>(ns) / 1000 : 0;
  int b = 0;
  while (us > 1 && b < FetcherStats::kLatencyBuckets - 1) {
    us >>= 1;
    ++b;
  }
  return b;
}

}  // namespace

BundleFetcher::BundleFetcher(NeuronCache& cache, io::BatchReader& reader, const io::DirectFile& file,
                             const BundleFetcherOptions& options)
    : cache_(cache), reader_(reader), file_(file), options_(options) {
  if (options.max_active == 0) throw std::invalid_argument("bundle fetcher: max_active must be > 0");
  if (options.max_read_bytes < kStagingAlignment || options.max_read_bytes % kStagingAlignment != 0) {
    throw std::invalid_argument("bundle fetcher: max_read_bytes " + std::to_string(options.max_read_bytes) +
                                " must be a positive multiple of 4096");
  }
  uint64_t max_bundle = 0;
  for (size_t l = 0; l < cache.n_layers(); ++l) max_bundle = std::max(max_bundle, cache.layer(l).bundle_bytes);
  // The largest single read: a bundle bigger than max_read_bytes gets a read of its own, its aligned
  // blocks plus one (an unaligned start).
  const uint64_t largest_read = std::max<uint64_t>(options.max_read_bytes, align_up(max_bundle, kStagingAlignment) + kStagingAlignment);
  uint64_t staging = options.staging_bytes;
  if (staging == 0) {
    const uint64_t per_bundle = align_up(max_bundle, kStagingAlignment) + kStagingAlignment + options.max_gap_bytes;
    staging = std::min(kDefaultStagingCap, per_bundle * options.max_active * std::max<uint32_t>(1, options.max_prefetch_layers));
    staging = std::max(staging, largest_read);
  }
  if (staging < largest_read) {
    throw std::invalid_argument("bundle fetcher: staging_bytes " + std::to_string(staging) +
                                " cannot hold the largest read of " + std::to_string(largest_read) + " bytes");
  }
  staging_ = io::AlignedBuffer(align_up(staging, kStagingAlignment), kStagingAlignment);

  if (options.max_prefetch_layers == 0) throw std::invalid_argument("bundle fetcher: max_prefetch_layers must be > 0");
  const size_t n = options.max_active;
  // A prefetch may list max_active bundles for each of its layers.
  const size_t n_any = n * options.max_prefetch_layers;
  resident_.resize(n);
  arrivals_.resize(n);
  missing_.resize(n_any);
  extents_.resize(n_any);
  reads_.resize(n_any);
  placements_.resize(n_any);
  read_first_.resize(n_any + 1);
  read_staging_.resize(n_any);
  requests_.resize(n_any);
  completions_.resize(std::max<size_t>(reader.capacity(), 1));
  prefetch_layers_.resize(options.max_prefetch_layers);
  prefetched_.resize(n_any);
  prefetched_counted_.resize(n_any);
  failure_.reserve(256);

  if (options.register_staging) {
    try {
      reader.register_arena(staging_.data(), staging_.size());
    } catch (const std::exception& e) {
      warning_ = std::string("bundle fetcher: staging buffer not registered with the reader (reads still work): ") + e.what();
    }
  }
}

BundleFetcher::~BundleFetcher() {
  try {
    cancel();
  } catch (...) {
    // Nothing sensible to do in a destructor; cancel() only throws if the reader itself breaks.
  }
}

const CacheLayerShape& BundleFetcher::check_request(uint32_t layer, std::span<const int32_t> list,
                                                    uint64_t tensor_offset) const {
  if (layer >= cache_.n_layers()) {
    throw std::invalid_argument("bundle fetcher: layer " + std::to_string(layer) + " out of range");
  }
  const CacheLayerShape& shape = cache_.layer(layer);
  if (list.size() > options_.max_active) {
    throw std::invalid_argument("bundle fetcher: " + std::to_string(list.size()) + " active neurons exceed max_active " +
                                std::to_string(options_.max_active));
  }
  uint64_t tensor_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(shape.n_ff), shape.bundle_bytes, &tensor_bytes) ||
      tensor_offset > file_.size() || tensor_bytes > file_.size() - tensor_offset) {
    throw std::invalid_argument("bundle fetcher: " + file_.path() + ": layer " + std::to_string(layer) +
                                "'s bundle tensor [" + std::to_string(tensor_offset) + ", +" + std::to_string(tensor_bytes) +
                                ") lies outside the file of " + std::to_string(file_.size()) + " bytes");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] < 0 || static_cast<uint32_t>(list[i]) >= shape.n_ff) {
      throw std::invalid_argument("bundle fetcher: active entry " + std::to_string(i) + ": neuron " +
                                  std::to_string(list[i]) + " out of range [0, " + std::to_string(shape.n_ff) + ")");
    }
  }
  return shape;
}

void BundleFetcher::begin(uint32_t layer, std::span<const int32_t> active, uint64_t tensor_offset) {
  if (prefetch_in_flight()) finish_prefetch();
  if (active_) cancel();
  const CacheLayerShape& shape = check_request(layer, active, tensor_offset);

  ++stats_.fetches;
  bundle_bytes_ = shape.bundle_bytes;
  n_resident_ = n_missing_ = n_reads_ = 0;
  next_read_ = in_flight_ = 0;
  failed_ = false;
  prefetching_ = false;
  const auto prefetched_end = prefetched_.begin() + static_cast<std::ptrdiff_t>(n_prefetched_);
  for (size_t i = 0; i < active.size(); ++i) {
    const uint32_t neuron = static_cast<uint32_t>(active[i]);
    if (const uint8_t* data = cache_.find(layer, neuron)) {
      resident_[n_resident_++] = FetchedBundle{static_cast<uint32_t>(i), neuron, data};
      if (n_prefetched_ > 0) {
        const auto it = std::lower_bound(prefetched_.begin(), prefetched_end, bundle_key(layer, neuron));
        if (it != prefetched_end && *it == bundle_key(layer, neuron)) {
          uint8_t& counted = prefetched_counted_[static_cast<size_t>(it - prefetched_.begin())];
          stats_.prefetched_used += counted == 0;
          counted = 1;
        }
      }
    } else {
      const uint64_t offset = tensor_offset + static_cast<uint64_t>(neuron) * shape.bundle_bytes;
      missing_[n_missing_++] = Missing{layer, neuron, static_cast<uint32_t>(i), offset, nullptr, false};
    }
  }
  stats_.bundles_resident += n_resident_;
  if (n_missing_ == 0) return;

  // File order: coalesce_reads wants extents sorted by offset, and neighbours merge.
  std::sort(missing_.begin(), missing_.begin() + n_missing_,
            [](const Missing& a, const Missing& b) { return a.neuron < b.neuron; });
  for (size_t i = 1; i < n_missing_; ++i) {
    if (missing_[i].neuron == missing_[i - 1].neuron) {
      throw std::invalid_argument("bundle fetcher: neuron " + std::to_string(missing_[i].neuron) +
                                  " is listed twice in the active list");
    }
  }
  active_ = true;  // from here on, claims exist: errors must give them back
  for (size_t i = 0; i < n_missing_; ++i) {
    Missing& m = missing_[i];
    m.slot = cache_.claim(layer, m.neuron);
    if (m.slot == nullptr) {
      const uint32_t claimed = static_cast<uint32_t>(i);
      abandon_unsettled();
      active_ = false;
      throw FetchError("neuron cache: no slot for layer " + std::to_string(layer) + " bundle " + std::to_string(m.neuron) +
                       ": all " + std::to_string(cache_.cold_slots()) + " cold slots are in use by this step (" +
                       std::to_string(claimed) + " claimed of " + std::to_string(n_missing_) +
                       " missing); the plan reserved too few cold slots for this active set");
    }
  }
  try {
    plan_reads();
    submit_window();
  } catch (...) {
    abandon_unsettled();
    active_ = false;
    throw;
  }
}

void BundleFetcher::prefetch(std::span<const PrefetchRequest> requests) {
  if (prefetch_in_flight()) finish_prefetch();
  if (active_) cancel();
  if (requests.size() > prefetch_layers_.size()) {
    throw std::invalid_argument("bundle fetcher: a prefetch of " + std::to_string(requests.size()) +
                                " layers exceeds max_prefetch_layers " + std::to_string(prefetch_layers_.size()));
  }
  for (size_t r = 0; r < requests.size(); ++r) {
    const CacheLayerShape& shape = check_request(requests[r].layer, requests[r].predicted, requests[r].tensor_offset);
    if (r == 0) bundle_bytes_ = shape.bundle_bytes;
    if (shape.bundle_bytes != bundle_bytes_) {
      throw std::invalid_argument("bundle fetcher: a prefetch's layers must share one bundle size (layer " +
                                  std::to_string(requests[r].layer) + ")");
    }
    for (size_t q = 0; q < r; ++q) {
      if (requests[q].layer == requests[r].layer) {
        throw std::invalid_argument("bundle fetcher: layer " + std::to_string(requests[r].layer) +
                                    " is listed twice in one prefetch");
      }
    }
  }
  n_resident_ = n_missing_ = n_reads_ = n_arrivals_ = 0;
  next_read_ = in_flight_ = 0;
  failed_ = false;
  n_prefetched_ = 0;  // the last prefetch's bundles count no more
  n_prefetch_layers_ = 0;
  for (const PrefetchRequest& request : requests) {
    prefetch_layers_[n_prefetch_layers_++] = request.layer;
    const size_t claimed = claim_prefetch(request, n_missing_);
    const bool out_of_slots = claimed < n_missing_;
    n_missing_ = claimed;
    if (out_of_slots) break;
  }
  if (n_missing_ == 0) return;
  // File order for coalescing: neighbouring bundles merge, across layers too.
  std::sort(missing_.begin(), missing_.begin() + static_cast<std::ptrdiff_t>(n_missing_),
            [](const Missing& a, const Missing& b) { return a.offset < b.offset; });
  ++stats_.prefetches;
  active_ = true;
  prefetching_ = true;
  try {
    plan_reads();
    submit_window();
  } catch (const std::invalid_argument&) {
    abandon_unsettled();
    active_ = prefetching_ = false;
    throw;
  } catch (const FetchError&) {
    // The reader took nothing (or refused): no prefetch this time.
    abandon_unsettled();
    active_ = prefetching_ = false;
    return;
  }
  // One window only: the claims of reads that did not fit are given back now.
  for (size_t r = next_read_; r < n_reads_; ++r) {
    for (uint32_t i = read_first_[r]; i < read_first_[r + 1]; ++i) {
      cache_.abandon(missing_[i].layer, missing_[i].neuron);
      missing_[i].settled = true;
    }
  }
  n_reads_ = next_read_;
  if (in_flight_ == 0) active_ = prefetching_ = false;
}

// Appends the request's bundles that are neither resident nor already being read to missing_ from
// `first` on, each with a claimed slot; returns the new end. Fewer than it listed means the cache
// ran out of free slots (the caller stops there).
size_t BundleFetcher::claim_prefetch(const PrefetchRequest& request, size_t first) {
  size_t end = first;
  for (size_t i = 0; i < request.predicted.size(); ++i) {
    const uint32_t neuron = static_cast<uint32_t>(request.predicted[i]);
    // peek: a prediction is not a use (no hit counted, no reference bit, no pin).
    if (cache_.peek(request.layer, neuron) != nullptr) continue;
    const uint64_t offset = request.tensor_offset + static_cast<uint64_t>(neuron) * bundle_bytes_;
    missing_[end++] = Missing{request.layer, neuron, static_cast<uint32_t>(i), offset, nullptr, false};
  }
  // Lowest bundle numbers first: the pack orders each layer's neurons by activation frequency, so
  // when slots run out the likeliest ones have been claimed.
  std::sort(missing_.begin() + static_cast<std::ptrdiff_t>(first), missing_.begin() + static_cast<std::ptrdiff_t>(end),
            [](const Missing& a, const Missing& b) { return a.neuron < b.neuron; });
  size_t kept = first;
  for (size_t i = first; i < end; ++i) {
    if (i > first && missing_[i].neuron == missing_[i - 1].neuron) continue;  // a duplicate: read once
    missing_[kept] = missing_[i];
    missing_[kept].slot = cache_.claim(request.layer, missing_[kept].neuron);
    if (missing_[kept].slot == nullptr) return kept;  // every slot is pinned or pending: read what we have
    ++kept;
  }
  return kept;
}

void BundleFetcher::finish_prefetch() {
  const int64_t t0 = now_ns();
  drain_in_flight();
  abandon_unsettled();
  const int64_t t1 = now_ns();
  stats_.prefetch_wait_ns += static_cast<uint64_t>(t1 - t0);
  // Submit -> drained: an upper bound on the time the reads were outstanding (they may have
  // landed during the attention), so the throughput derived from busy_ns stays a lower bound.
  stats_.busy_ns += static_cast<uint64_t>(t1 - window_start_ns_);
  // What arrived, for prefetched_used.
  n_prefetched_ = 0;
  for (size_t i = 0; i < n_missing_; ++i) {
    const Missing& m = missing_[i];
    if (cache_.peek(m.layer, m.neuron) != nullptr) prefetched_[n_prefetched_++] = bundle_key(m.layer, m.neuron);
  }
  std::sort(prefetched_.begin(), prefetched_.begin() + static_cast<std::ptrdiff_t>(n_prefetched_));
  std::fill(prefetched_counted_.begin(), prefetched_counted_.begin() + static_cast<std::ptrdiff_t>(n_prefetched_), 0);
  n_prefetch_layers_ = 0;
  stats_.prefetched_bundles += n_prefetched_;
  if (failed_) ++stats_.prefetch_failed_reads;
  failed_ = false;
  active_ = prefetching_ = false;
}

void BundleFetcher::plan_reads() {
  for (size_t i = 0; i < n_missing_; ++i) extents_[i] = io::Extent{missing_[i].offset, bundle_bytes_};
  io::CoalesceOptions co;
  co.file_size = file_.size();
  co.alignment = static_cast<uint32_t>(file_.alignment());
  co.max_read_bytes = options_.max_read_bytes;
  co.max_gap_bytes = options_.max_gap_bytes;
  const io::CoalesceStats cs = io::coalesce_reads(std::span<const io::Extent>(extents_.data(), n_missing_), co,
                                                  std::span<io::CoalescedRead>(reads_.data(), n_missing_),
                                                  std::span<io::ExtentPlacement>(placements_.data(), n_missing_));
  n_reads_ = cs.reads;
  stats_.bytes_wasted += cs.bytes_wasted;
  // Placements are in extent order and their reads never go back, so each read's extents are a
  // contiguous run of the (sorted) missing list.
  size_t r = 0;
  read_first_[0] = 0;
  for (size_t i = 0; i < n_missing_; ++i) {
    while (r < placements_[i].read) read_first_[++r] = static_cast<uint32_t>(i);
  }
  while (r < n_reads_) read_first_[++r] = static_cast<uint32_t>(n_missing_);
}

void BundleFetcher::submit_window() {
  const size_t slots = reader_.free_slots();
  if (slots == 0) throw FetchError("bundle fetcher: the reader has no free slots (is it shared?)");
  uint64_t used = 0;
  size_t n = 0;
  while (next_read_ + n < n_reads_ && n < slots) {
    const size_t r = next_read_ + n;
    const uint64_t room = align_up(reads_[r].length, kStagingAlignment);
    if (used + room > staging_.size()) break;  // the constructor made sure one read always fits
    read_staging_[r] = used;
    requests_[n] = io::ReadRequest{reads_[r].offset, reads_[r].length, reads_[r].wanted, staging_.data() + used, r};
    used += room;
    ++n;
  }
  window_start_ns_ = now_ns();
  try {
    reader_.submit(std::span<const io::ReadRequest>(requests_.data(), n));
  } catch (const std::invalid_argument& e) {
    throw FetchError(std::string("bundle fetcher: ") + file_.path() + ": the reader refused the reads: " + e.what());
  } catch (const io::IoError& e) {
    // The reader failed to start them (io_uring_submit): a storage error like a failed read, which
    // the callers (prefetch drops it, a fetch fails its step) already handle as a FetchError.
    throw FetchError(std::string("bundle fetcher: ") + file_.path() + ": " + e.what());
  }
  next_read_ += n;
  in_flight_ += n;
  stats_.reads += n;
}

void BundleFetcher::settle_read(const io::ReadCompletion& c) {
  const size_t r = static_cast<size_t>(c.tag);
  const uint32_t first = read_first_[r], last = read_first_[r + 1];
  const int64_t latency = now_ns() - window_start_ns_;
  ++stats_.latency_us_log2[latency_bucket(latency)];

  bool ok = c.ok();
  io::ReadCompletion failure = c;
  if (ok) {
    // Defensive: the reader promises result >= wanted, i.e. the last bundle's end.
    const uint64_t needed = placements_[last - 1].offset_in_read + bundle_bytes_;
    if (static_cast<uint64_t>(c.result) < needed) {
      ok = false;
      failure.result = -ENODATA;
    }
  }
  if (!ok) {
    ++stats_.failed_reads;
    for (uint32_t i = first; i < last; ++i) {
      cache_.abandon(missing_[i].layer, missing_[i].neuron);
      missing_[i].settled = true;
    }
    if (!failed_) {
      failed_ = true;
      failure_ = "bundle fetch of layer " + std::to_string(missing_[first].layer) + ": " +
                 io::describe_failure(file_.path(), failure);
    }
    return;
  }
  stats_.bytes_read += static_cast<uint64_t>(c.result);
  const uint8_t* base = staging_.data() + read_staging_[r];
  for (uint32_t i = first; i < last; ++i) {
    Missing& m = missing_[i];
    std::memcpy(m.slot, base + placements_[i].offset_in_read, bundle_bytes_);
    const uint8_t* data = cache_.commit(m.layer, m.neuron);
    m.settled = true;
    ++stats_.bundles_read;
    stats_.bytes_wanted += bundle_bytes_;
    // After a failure nothing more is handed out (the fetch throws), but good reads still commit.
    if (!failed_ && !prefetching_) arrivals_[n_arrivals_++] = FetchedBundle{m.index, m.neuron, data};
  }
}

std::span<const FetchedBundle> BundleFetcher::next_arrivals() {
  if (!active_ || prefetching_) return {};
  while (true) {
    if (in_flight_ == 0) {
      if (failed_) fail_after_drain();
      if (next_read_ == n_reads_) {
        active_ = false;
        return {};
      }
      try {
        submit_window();
      } catch (...) {
        abandon_unsettled();
        active_ = false;
        throw;
      }
    }
    const int64_t t0 = now_ns();
    const size_t got = reader_.harvest(std::span<io::ReadCompletion>(completions_), 1);
    stats_.io_wait_ns += static_cast<uint64_t>(now_ns() - t0);
    in_flight_ -= got;
    if (in_flight_ == 0) stats_.busy_ns += static_cast<uint64_t>(now_ns() - window_start_ns_);
    n_arrivals_ = 0;
    for (size_t k = 0; k < got; ++k) settle_read(completions_[k]);
    if (failed_) {
      drain_in_flight();
      fail_after_drain();
    }
    if (n_arrivals_ > 0) return {arrivals_.data(), n_arrivals_};
  }
}

void BundleFetcher::drain_in_flight() {
  n_arrivals_ = 0;
  while (in_flight_ > 0) {
    const size_t got = reader_.harvest(std::span<io::ReadCompletion>(completions_), 1);
    in_flight_ -= got;
    n_arrivals_ = 0;  // nothing drained is handed out
    for (size_t k = 0; k < got; ++k) settle_read(completions_[k]);
  }
}

void BundleFetcher::fail_after_drain() {
  abandon_unsettled();  // the claims of reads never submitted
  active_ = false;
  throw FetchError(failure_);
}

void BundleFetcher::abandon_unsettled() {
  for (size_t i = 0; i < n_missing_; ++i) {
    Missing& m = missing_[i];
    if (!m.settled && m.slot != nullptr) cache_.abandon(m.layer, m.neuron);
    m.settled = true;
  }
}

void BundleFetcher::cancel() {
  if (prefetch_in_flight()) {
    finish_prefetch();
    return;
  }
  if (!active_) return;
  // The reads in flight write into the staging buffer: wait for them before anything reuses it.
  // Their bundles are committed when good (they are valid data), abandoned otherwise.
  drain_in_flight();
  abandon_unsettled();
  active_ = false;
}

}  // namespace ember::cache
