#include "core/cache/offload_stats.h"

namespace ember {
namespace {

// r = op(a, b) for every counter of OffloadStats (hot_load_bytes: b's, a one-off at load).
template <class Op>
OffloadStats combine(const OffloadStats& a, const OffloadStats& b, Op op) {
  OffloadStats r;
  r.cache.hot_hits = op(a.cache.hot_hits, b.cache.hot_hits);
  r.cache.cold_hits = op(a.cache.cold_hits, b.cache.cold_hits);
  r.cache.misses = op(a.cache.misses, b.cache.misses);
  r.cache.evictions = op(a.cache.evictions, b.cache.evictions);
  r.cache.commits = op(a.cache.commits, b.cache.commits);
  r.cache.abandons = op(a.cache.abandons, b.cache.abandons);
  r.cache.claim_failures = op(a.cache.claim_failures, b.cache.claim_failures);
  r.cache.bytes_copied_in = op(a.cache.bytes_copied_in, b.cache.bytes_copied_in);
  r.fetch.fetches = op(a.fetch.fetches, b.fetch.fetches);
  r.fetch.bundles_resident = op(a.fetch.bundles_resident, b.fetch.bundles_resident);
  r.fetch.bundles_read = op(a.fetch.bundles_read, b.fetch.bundles_read);
  r.fetch.reads = op(a.fetch.reads, b.fetch.reads);
  r.fetch.bytes_read = op(a.fetch.bytes_read, b.fetch.bytes_read);
  r.fetch.bytes_wanted = op(a.fetch.bytes_wanted, b.fetch.bytes_wanted);
  r.fetch.bytes_wasted = op(a.fetch.bytes_wasted, b.fetch.bytes_wasted);
  r.fetch.io_wait_ns = op(a.fetch.io_wait_ns, b.fetch.io_wait_ns);
  r.fetch.busy_ns = op(a.fetch.busy_ns, b.fetch.busy_ns);
  r.fetch.failed_reads = op(a.fetch.failed_reads, b.fetch.failed_reads);
  r.fetch.prefetches = op(a.fetch.prefetches, b.fetch.prefetches);
  r.fetch.prefetched_bundles = op(a.fetch.prefetched_bundles, b.fetch.prefetched_bundles);
  r.fetch.prefetched_used = op(a.fetch.prefetched_used, b.fetch.prefetched_used);
  r.fetch.prefetch_failed_reads = op(a.fetch.prefetch_failed_reads, b.fetch.prefetch_failed_reads);
  r.fetch.prefetch_wait_ns = op(a.fetch.prefetch_wait_ns, b.fetch.prefetch_wait_ns);
  for (size_t i = 0; i < r.fetch.latency_us_log2.size(); ++i) {
    r.fetch.latency_us_log2[i] = op(a.fetch.latency_us_log2[i], b.fetch.latency_us_log2[i]);
  }
  r.sparse_steps = op(a.sparse_steps, b.sparse_steps);
  r.dense_steps = op(a.dense_steps, b.dense_steps);
  r.stream_reads = op(a.stream_reads, b.stream_reads);
  r.stream_bytes_read = op(a.stream_bytes_read, b.stream_bytes_read);
  r.stream_wait_ns = op(a.stream_wait_ns, b.stream_wait_ns);
  r.hot_load_bytes = b.hot_load_bytes;
  return r;
}

}  // namespace

OffloadStats offload_stats_between(const OffloadStats& before, const OffloadStats& after) {
  return combine(after, before, [](uint64_t x, uint64_t y) { return x - y; });
}

void add_offload_stats(OffloadStats& sum, const OffloadStats& more) {
  sum = combine(sum, more, [](uint64_t x, uint64_t y) { return x + y; });
}

}  // namespace ember
