#pragma once
// The counters of the neuron cache under a memory budget (OffloadedFfn::stats()), and the
// arithmetic on them that reports need (a stretch of work is the difference of two snapshots).
#include <cstdint>

#include "core/cache/bundle_fetcher.h"
#include "core/cache/neuron_cache.h"

namespace ember {

struct OffloadStats {
  cache::NeuronCacheStats cache;
  cache::FetcherStats fetch;
  uint64_t sparse_steps = 0;      // layer steps through the cache (one token each)
  uint64_t dense_steps = 0;       // layer steps streamed (prompt batches, dense decode)
  uint64_t stream_reads = 0;
  uint64_t stream_bytes_read = 0;
  uint64_t stream_wait_ns = 0;    // blocked waiting for streamed chunks
  uint64_t hot_load_bytes = 0;    // read at start into the hot prefixes
  uint64_t bytes_read() const { return fetch.bytes_read + stream_bytes_read; }
  uint64_t io_wait_ns() const { return fetch.io_wait_ns + fetch.prefetch_wait_ns + stream_wait_ns; }
};

// after - before, counter by counter (hot_load_bytes: after's).
OffloadStats offload_stats_between(const OffloadStats& before, const OffloadStats& after);
// sum += more, counter by counter.
void add_offload_stats(OffloadStats& sum, const OffloadStats& more);

}  // namespace ember
