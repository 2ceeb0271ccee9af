#pragma once
// Brings one layer's active bundles into the neuron cache and hands them to the caller as they
// become available: resident bundles (hits) at once, missing ones as their reads complete, so the
// caller computes the resident neurons while the reads are in flight.
//
// Per fetch: split the active list into hits and misses (NeuronCache::find), claim a cache slot per
// miss, coalesce the misses' byte extents (sorted by offset: neighbouring cold bundles merge into
// one read, io::coalesce_reads) and submit the reads in one batch into an aligned staging buffer
// (O_DIRECT cannot read a bundle's unaligned extent into a slot directly); each completed read's
// bundles are copied into their slots and committed. A batch bigger than the staging buffer or the
// reader's capacity goes out in windows, one after the other.
//
// Failures: a failed read abandons its claimed slots; the fetcher finishes harvesting what is in
// flight (the kernel must not write into reused memory), abandons the claims of reads never
// submitted, and throws FetchError naming the file, offset and length. The cache stays consistent;
// the next fetch works.
//
// Everything is preallocated at construction for `max_active` neurons: a fetch allocates nothing
// (except the message of an error). Not thread-safe; the reader must not be used by anyone else
// while a fetch is in progress.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/cache/fetch_error.h"
#include "core/cache/neuron_cache.h"
#include "io/batch_reader.h"
#include "io/file.h"
#include "io/read_coalescer.h"

namespace ember::io {
class DirectFile;
}

namespace ember::cache {

struct BundleFetcherOptions {
  uint32_t max_active = 0;              // most neurons in one fetch (> 0)
  uint32_t max_read_bytes = 128 << 10;  // coalescing stops here (io::CoalesceOptions)
  uint32_t max_gap_bytes = 0;           // unwanted bytes a merged read may bridge
  // Staging buffer bytes; 0: room for max_active missing bundles of each of max_prefetch_layers
  // layers in one window, capped at 16 MiB (and never below the largest single read).
  uint64_t staging_bytes = 0;
  // Register the staging buffer as the reader's arena (io_uring fixed buffers: no page pinning per
  // read). A refusal (RLIMIT_MEMLOCK) is not an error: warning() says so.
  bool register_staging = true;
  // Most layers one prefetch() may read ahead for (a mixture of experts reads every routed expert's
  // predicted bundles at once; each expert is a layer of the cache). Sizes the per-fetch lists.
  uint32_t max_prefetch_layers = 1;
};

// One layer's share of a prefetch: its predicted bundles and its bundle tensor's file offset.
struct PrefetchRequest {
  uint32_t layer = 0;
  std::span<const int32_t> predicted;
  uint64_t tensor_offset = 0;
};

// One bundle handed to the caller: valid until the cache's next begin_step().
struct FetchedBundle {
  uint32_t index = 0;   // position in the active list (for computing in list order)
  uint32_t neuron = 0;  // bundle number in the layer
  const uint8_t* data = nullptr;
};

struct FetcherStats {
  static constexpr int kLatencyBuckets = 24;
  uint64_t fetches = 0;
  uint64_t bundles_resident = 0;  // handed out from the cache
  uint64_t bundles_read = 0;      // read from the file and committed
  uint64_t reads = 0;             // read requests submitted
  uint64_t bytes_read = 0;        // bytes the completed reads delivered
  uint64_t bytes_wanted = 0;      // bundle bytes those reads were for
  uint64_t bytes_wasted = 0;      // coalescing and alignment overhead (io::CoalesceStats)
  uint64_t io_wait_ns = 0;        // time blocked in BatchReader::harvest
  // Sum over windows of submit -> last completion harvested: the time reads were outstanding
  // (bytes_read / busy_ns is the throughput the device delivered to the fetcher; it includes any
  // compute the caller did before harvesting, so it is a lower bound).
  uint64_t busy_ns = 0;
  uint64_t failed_reads = 0;
  // Prefetch (prefetch()): bundles read ahead and committed, how many of them the next fetch of
  // their layer asked for, reads that failed (dropped: the real fetch reads again and reports), and
  // the time begin() waited for prefetch reads still in flight.
  uint64_t prefetches = 0;
  uint64_t prefetched_bundles = 0;
  uint64_t prefetched_used = 0;
  uint64_t prefetch_failed_reads = 0;
  uint64_t prefetch_wait_ns = 0;
  // Read latency (submit -> harvest) in microseconds: bucket b counts [2^b, 2^(b+1)), bucket 0 also
  // below 1 us, the last bucket everything above.
  std::array<uint64_t, kLatencyBuckets> latency_us_log2{};
};

class BundleFetcher {
 public:
  // `cache`, `reader` and `file` must outlive the fetcher; `reader` reads `file`. Throws
  // std::invalid_argument for bad options.
  BundleFetcher(NeuronCache& cache, io::BatchReader& reader, const io::DirectFile& file,
                const BundleFetcherOptions& options);
  ~BundleFetcher();  // cancels a fetch in progress (waits for its reads)
  BundleFetcher(const BundleFetcher&) = delete;
  BundleFetcher& operator=(const BundleFetcher&) = delete;

  // Starts fetching layer `layer`'s bundles `active` (any order, no duplicates) from the bundle
  // tensor at file offset `tensor_offset` (bundle k at tensor_offset + k * bundle_bytes). Looks up
  // every bundle (pinning hits for the cache's current step), claims slots for the misses and
  // submits their reads. Cancels an unfinished earlier fetch. Throws std::invalid_argument for a bad
  // layer, neuron, duplicate, list longer than max_active or tensor outside the file; FetchError
  // when the cache has no slot left for this step or the reader refuses the batch. Nothing is
  // claimed after a throw.
  void begin(uint32_t layer, std::span<const int32_t> active, uint64_t tensor_offset);
  // The bundles that were resident at begin() (valid until the next begin()).
  std::span<const FetchedBundle> resident() const { return {resident_.data(), n_resident_}; }
  // Waits for at least one outstanding read and returns the bundles it delivered (valid until the
  // next call); empty when every missing bundle has been delivered. Throws FetchError on a failed
  // read (after draining, see above).
  std::span<const FetchedBundle> next_arrivals();
  bool in_progress() const { return active_ && !prefetching_; }
  // Abandons the rest of a fetch (or a prefetch): waits for the reads in flight, commits the good
  // ones, gives back every unfilled claim.
  void cancel();

  // Reads ahead: claims cold slots for the requests' predicted bundles that are not resident and
  // submits their reads in one batch (neighbours in the file coalesce, across layers too), handing
  // nothing out. The next begin() (for any layer) first waits for them and commits what arrived,
  // so the fetches of those layers find them resident. Best effort: claims go in request order,
  // each request's lowest bundle numbers (its likeliest) first, and stop when no slot is free
  // (slots pinned by the current step are never taken); only what fits one window of the staging
  // buffer and the reader is read; a failed read is counted and dropped (the real fetch reads the
  // bundle again and reports its error). Ends an unfinished fetch first. Throws
  // std::invalid_argument like begin(), for more requests than max_prefetch_layers, for a layer
  // listed twice and for layers of different bundle sizes; nothing else.
  void prefetch(std::span<const PrefetchRequest> requests);
  void prefetch(uint32_t layer, std::span<const int32_t> predicted, uint64_t tensor_offset) {
    const PrefetchRequest one{layer, predicted, tensor_offset};
    prefetch(std::span<const PrefetchRequest>(&one, 1));
  }
  bool prefetch_in_flight() const { return active_ && prefetching_; }
  // While prefetch_in_flight(): whether the prefetch reads bundles of `layer`.
  bool prefetch_covers(uint32_t layer) const {
    return std::find(prefetch_layers_.begin(), prefetch_layers_.begin() + n_prefetch_layers_, layer) !=
           prefetch_layers_.begin() + n_prefetch_layers_;
  }

  // begin(), then f(const FetchedBundle&) for every resident bundle, then for each arrival.
  // If f throws, the fetch is cancelled and the exception passed on.
  template <class F>
  void fetch(uint32_t layer, std::span<const int32_t> active, uint64_t tensor_offset, F&& f) {
    begin(layer, active, tensor_offset);
    try {
      for (const FetchedBundle& b : resident()) f(b);
      for (auto arrived = next_arrivals(); !arrived.empty(); arrived = next_arrivals()) {
        for (const FetchedBundle& b : arrived) f(b);
      }
    } catch (...) {
      cancel();
      throw;
    }
  }

  const FetcherStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }
  uint64_t staging_bytes() const { return staging_.size(); }
  // Empty, or why the staging buffer could not be registered with the reader.
  const std::string& warning() const { return warning_; }

 private:
  struct Missing {
    uint32_t layer = 0;
    uint32_t neuron = 0;
    uint32_t index = 0;
    uint64_t offset = 0;  // the bundle's file offset
    uint8_t* slot = nullptr;
    bool settled = false;  // committed or abandoned
  };
  // A prefetched bundle, for prefetched_used: counted once, by the first fetch of its layer.
  static uint64_t bundle_key(uint32_t layer, uint32_t neuron) { return uint64_t{layer} << 32 | neuron; }

  const CacheLayerShape& check_request(uint32_t layer, std::span<const int32_t> list, uint64_t tensor_offset) const;
  size_t claim_prefetch(const PrefetchRequest& request, size_t first);
  void plan_reads();
  void finish_prefetch();
  void submit_window();
  void settle_read(const io::ReadCompletion& completion);
  void abandon_unsettled();
  void drain_in_flight();
  [[noreturn]] void fail_after_drain();

  NeuronCache& cache_;
  io::BatchReader& reader_;
  const io::DirectFile& file_;
  BundleFetcherOptions options_;
  io::AlignedBuffer staging_;
  std::string warning_;

  // Per fetch (preallocated to max_active).
  std::vector<FetchedBundle> resident_;
  std::vector<FetchedBundle> arrivals_;
  std::vector<Missing> missing_;
  std::vector<io::Extent> extents_;
  std::vector<io::CoalescedRead> reads_;
  std::vector<io::ExtentPlacement> placements_;
  std::vector<uint32_t> read_first_;      // extents of read r: [read_first_[r], read_first_[r + 1])
  std::vector<uint64_t> read_staging_;    // staging offset of read r (in the current window)
  std::vector<io::ReadRequest> requests_;
  std::vector<io::ReadCompletion> completions_;  // reader capacity
  size_t n_resident_ = 0, n_missing_ = 0, n_reads_ = 0, n_arrivals_ = 0;
  size_t next_read_ = 0;  // first read not yet submitted
  size_t in_flight_ = 0;
  uint64_t bundle_bytes_ = 0;
  bool active_ = false;
  bool failed_ = false;
  bool prefetching_ = false;  // the reads in flight are a prefetch's (nothing is handed out)
  // The layers of the prefetch in flight.
  std::vector<uint32_t> prefetch_layers_;
  size_t n_prefetch_layers_ = 0;
  // The bundles the last prefetch committed (bundle_key, sorted), to count how many the fetches
  // until the next prefetch use; prefetched_counted_ marks those counted.
  std::vector<uint64_t> prefetched_;
  std::vector<uint8_t> prefetched_counted_;
  size_t n_prefetched_ = 0;
  std::string failure_;  // the first failed read's message
  int64_t window_start_ns_ = 0;
  FetcherStats stats_;
};

}  // namespace ember::cache
