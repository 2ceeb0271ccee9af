// cache::BundleFetcher and cache::load_hot_prefixes on a synthetic pack: every bundle is filled with
// a pattern derived from (layer, neuron, byte), so each delivered bundle is checked byte for byte.
// Both backends (io_uring skipped visibly when unavailable), O_DIRECT and buffered, a small cache
// that forces evictions over many random steps, windows (small staging buffer, small reader), and
// injected faults: the error names the file, offset and length, the cache stays consistent and the
// next fetch works.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cache/bundle_fetcher.h"
#include "core/cache/hot_loader.h"
#include "io/direct_file.h"
#include "io/fault_injecting_reader.h"
#include "io/pread_pool_reader.h"
#include "io/uring_reader.h"
#include "tests/cache/allocation_counter.h"
#include "tests/io/io_test_files.h"

using namespace ember;
using namespace ember::cache;

namespace {

constexpr uint32_t kLayers = 3;
constexpr uint32_t kNff = 64;
constexpr uint64_t kBundle = 1000;  // not a multiple of 4096: bundles straddle blocks
constexpr uint32_t kMaxActive = 20;

uint8_t pattern(uint32_t layer, uint32_t neuron, uint64_t j) {
  uint32_t h = (layer + 1) * 0x9E3779B1u ^ (neuron + 1) * 0x85EBCA77u ^ static_cast<uint32_t>(j + 1) * 0xC2B2AE3Du;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  return static_cast<uint8_t>(h);
}

bool bundle_ok(uint32_t layer, uint32_t neuron, const uint8_t* data) {
  if (data == nullptr) return false;
  for (uint64_t j = 0; j < kBundle; ++j) {
    if (data[j] != pattern(layer, neuron, j)) return false;
  }
  return true;
}

// A file laid out like a pack: junk, then per layer a 4 KiB-aligned bundle tensor; the last
// tensor ends exactly at the end of the file (its last block is partial).
struct SyntheticPack {
  std::vector<uint64_t> offsets;
  std::string contents;
  SyntheticPack() {
    uint64_t pos = 4096 + 123;
    for (uint32_t l = 0; l < kLayers; ++l) {
      pos = (pos + 4095) / 4096 * 4096;
      offsets.push_back(pos);
      pos += kNff * kBundle + (l + 1 < kLayers ? 777 : 0);
    }
    contents.assign(pos, static_cast<char>(0xEE));
    for (uint32_t l = 0; l < kLayers; ++l) {
      for (uint32_t n = 0; n < kNff; ++n) {
        for (uint64_t j = 0; j < kBundle; ++j) contents[offsets[l] + n * kBundle + j] = static_cast<char>(pattern(l, n, j));
      }
    }
  }
};

enum class Backend { Uring, Pread };
const char* name(Backend b) { return b == Backend::Uring ? "io_uring" : "pread"; }

std::unique_ptr<io::BatchReader> make_reader(Backend b, const io::DirectFile& file, uint32_t capacity) {
  if (b == Backend::Uring) {
    return std::make_unique<io::UringReader>(file, io::UringOptions{.queue_depth = std::min(8u, capacity), .capacity = capacity});
  }
  return std::make_unique<io::PreadPoolReader>(file, io::PreadPoolOptions{.threads = 2, .capacity = capacity});
}

std::vector<Backend> backends(const char* test) {
  std::vector<Backend> out;
  if (io_test::uring_available(test)) out.push_back(Backend::Uring);
  out.push_back(Backend::Pread);
  return out;
}

// `n` distinct neurons skewed towards the hot end, in random order.
void random_active(std::mt19937& rng, uint32_t n, std::vector<int32_t>& active) {
  active.clear();
  while (active.size() < n) {
    const int32_t neuron = static_cast<int32_t>(std::min(rng() % kNff, rng() % kNff));
    if (std::find(active.begin(), active.end(), neuron) == active.end()) active.push_back(neuron);
  }
  std::shuffle(active.begin(), active.end(), rng);
}

// Fetches `active` of `layer`, checking every delivered bundle; returns the number of problems.
int fetch_and_check(BundleFetcher& fetcher, uint32_t layer, const std::vector<int32_t>& active, uint64_t offset,
                    std::vector<int>& seen) {
  int bad = 0;
  std::fill(seen.begin(), seen.end(), 0);
  std::array<const uint8_t*, kMaxActive> delivered{};
  fetcher.fetch(layer, active, offset, [&](const FetchedBundle& b) {
    if (b.index >= active.size() || active[b.index] != static_cast<int32_t>(b.neuron) || !bundle_ok(layer, b.neuron, b.data)) {
      ++bad;
      return;
    }
    ++seen[b.index];
    delivered[b.index] = b.data;
  });
  // Every bundle must stay put until the step ends (the kernel uses them all through the layer):
  // a slot handed out early and then taken for a later miss of the same fetch would show here.
  for (size_t i = 0; i < active.size(); ++i) {
    bad += seen[i] != 1;
    if (seen[i] == 1) bad += !bundle_ok(layer, static_cast<uint32_t>(active[i]), delivered[i]);
  }
  return bad;
}

// Parses "read [OFFSET, +LENGTH)" out of an error message.
bool parse_range(const std::string& msg, uint64_t* offset, uint64_t* length) {
  const size_t at = msg.find("read [");
  if (at == std::string::npos) return false;
  char* end = nullptr;
  *offset = std::strtoull(msg.c_str() + at + 6, &end, 10);
  if (std::strncmp(end, ", +", 3) != 0) return false;
  *length = std::strtoull(end + 3, &end, 10);
  return *end == ')';
}

void run_random_steps(Backend backend, io::DirectMode mode, BundleFetcherOptions options, uint32_t reader_capacity,
                      uint32_t seed) {
  const SyntheticPack pack;
  const io_test::TestFile tmp(io_test::disk_dir(), pack.contents);
  const io::DirectFile file = io::DirectFile::open(tmp.path(), mode);
  auto reader = make_reader(backend, file, reader_capacity);
  const CacheLayerShape shapes[] = {{kNff, kBundle, 8}, {kNff, kBundle, 0}, {kNff, kBundle, 3}};
  NeuronCache cache(shapes, 24);
  // Small chunks: several reads per layer, the last one cut by the end of the file for layer 2.
  const uint64_t hot_read = load_hot_prefixes(cache, *reader, file, pack.offsets, 4096);
  CHECK(hot_read >= 11 * kBundle);
  for (uint32_t l = 0; l < kLayers; ++l) {
    for (uint32_t n = 0; n < shapes[l].hot; ++n) CHECK(bundle_ok(l, n, cache.peek(l, n)));
  }

  options.max_active = kMaxActive;
  BundleFetcher fetcher(cache, *reader, file, options);
  std::mt19937 rng(seed);
  std::vector<int32_t> active;
  active.reserve(kMaxActive);
  std::vector<int> seen(kMaxActive);
  int bad = 0;
  for (int token = 0; token < 120; ++token) {
    for (uint32_t l = 0; l < kLayers; ++l) {
      cache.begin_step();
      random_active(rng, 1 + rng() % kMaxActive, active);
      bad += fetch_and_check(fetcher, l, active, pack.offsets[l], seen);
    }
  }
  CHECK(bad == 0);
  const FetcherStats& fs = fetcher.stats();
  const NeuronCacheStats& cs = cache.stats();
  CHECK(fs.fetches == 120 * kLayers);
  CHECK(fs.bundles_read > 0);
  CHECK(fs.bundles_read == cs.commits);
  CHECK(fs.bundles_resident == cs.hot_hits + cs.cold_hits);
  CHECK(fs.bytes_wanted == fs.bundles_read * kBundle);
  CHECK(fs.bytes_read >= fs.bytes_wanted);
  CHECK(fs.reads > 0);
  CHECK(fs.reads <= fs.bundles_read);
  CHECK(fs.failed_reads == 0);
  uint64_t histogram = 0;
  for (uint64_t v : fs.latency_us_log2) histogram += v;
  CHECK(histogram == fs.reads);
  CHECK(cs.evictions > 0);
  CHECK(cs.cold_hits > 0);
  CHECK(cs.hot_hits > 0);
  CHECK(cache.pending() == 0);
  cache.check_consistency();
}

struct FaultFixture {
  SyntheticPack pack;
  io_test::TestFile tmp{io_test::disk_dir(), pack.contents};
  io::DirectFile file = io::DirectFile::open(tmp.path());
  io::FaultInjectingReader* fault = nullptr;
  std::unique_ptr<io::BatchReader> reader;
  std::vector<CacheLayerShape> shapes = {{kNff, kBundle, 4}, {kNff, kBundle, 4}, {kNff, kBundle, 4}};
  NeuronCache cache{shapes, 24};
  std::unique_ptr<BundleFetcher> fetcher;

  explicit FaultFixture(Backend backend) {
    auto f = std::make_unique<io::FaultInjectingReader>(make_reader(backend, file, 32));
    fault = f.get();
    reader = std::move(f);
    load_hot_prefixes(cache, *reader, file, pack.offsets);
    fetcher = std::make_unique<BundleFetcher>(cache, *reader, file, BundleFetcherOptions{.max_active = kMaxActive});
  }

  // The failing fetch: returns its FetchError message ("" when nothing was thrown).
  std::string failing_fetch(const std::vector<int32_t>& active) {
    cache.begin_step();
    try {
      fetcher->fetch(1, active, pack.offsets[1], [](const FetchedBundle&) {});
    } catch (const FetchError& e) {
      return e.what();
    }
    return "";
  }

  // Every read covering layer `layer`'s bundle `neuron` fails with EIO; returns the bundle's offset.
  uint64_t fail_bundle(uint32_t layer, uint32_t neuron) {
    const uint64_t target = pack.offsets[layer] + neuron * kBundle;
    io::FaultPlan plan;
    plan.range_begin = target;
    plan.range_end = target + kBundle;
    plan.range_errno = EIO;
    fault->set_plan(plan);
    return target;
  }

  // After a failure: consistent, nothing pending, and the same fetch works without the fault.
  void check_recovers(const std::vector<int32_t>& active) {
    CHECK(cache.pending() == 0);
    CHECK_FALSE(fetcher->in_progress());
    cache.check_consistency();
    fault->set_plan({});
    cache.begin_step();
    std::vector<int> seen(kMaxActive);
    CHECK(fetch_and_check(*fetcher, 1, active, pack.offsets[1], seen) == 0);
    cache.check_consistency();
  }
};

}  // namespace

// Subcases outside the backend loops: doctest treats a SUBCASE met twice in one run as the same.
TEST_CASE("bundle fetcher: random steps with evictions deliver every bundle intact") {
  SUBCASE("defaults") {
    for (Backend backend : backends("bundle fetcher defaults")) {
      CAPTURE(name(backend));
      run_random_steps(backend, io::DirectMode::PreferDirect, {}, 32, 1);
    }
  }
  SUBCASE("windows: staging for one read at a time, reader smaller than the active set") {
    for (Backend backend : backends("bundle fetcher windows")) {
      CAPTURE(name(backend));
      run_random_steps(backend, io::DirectMode::PreferDirect, {.max_read_bytes = 4096, .staging_bytes = 8192}, 4, 2);
    }
  }
  SUBCASE("bridging gaps") {
    for (Backend backend : backends("bundle fetcher gaps")) {
      CAPTURE(name(backend));
      run_random_steps(backend, io::DirectMode::PreferDirect, {.max_read_bytes = 64 << 10, .max_gap_bytes = 8192}, 32, 3);
    }
  }
  SUBCASE("buffered file (no alignment)") {
    for (Backend backend : backends("bundle fetcher buffered")) {
      CAPTURE(name(backend));
      run_random_steps(backend, io::DirectMode::Buffered, {}, 32, 4);
    }
  }
}

TEST_CASE("bundle fetcher: a fetch with everything resident or missing, and no allocation per fetch") {
  const SyntheticPack pack;
  const io_test::TestFile tmp(io_test::disk_dir(), pack.contents);
  const io::DirectFile file = io::DirectFile::open(tmp.path());
  auto reader = make_reader(Backend::Pread, file, 32);
  const CacheLayerShape shapes[] = {{kNff, kBundle, 10}, {kNff, kBundle, 10}, {kNff, kBundle, 10}};
  NeuronCache cache(shapes, 30);
  load_hot_prefixes(cache, *reader, file, pack.offsets);
  BundleFetcher fetcher(cache, *reader, file, {.max_active = kMaxActive});
  std::vector<int> seen(kMaxActive);

  std::vector<int32_t> hot(10);
  std::iota(hot.begin(), hot.end(), 0);
  cache.begin_step();
  CHECK(fetch_and_check(fetcher, 0, hot, pack.offsets[0], seen) == 0);
  CHECK(fetcher.stats().reads == 0);
  std::vector<int32_t> none;
  CHECK(fetch_and_check(fetcher, 0, none, pack.offsets[0], seen) == 0);

  // Warm up, then count: begin/next_arrivals must not allocate (hits, misses, evictions, reads).
  std::mt19937 rng(9);
  std::vector<int32_t> active;
  active.reserve(kMaxActive);
  int bad = 0;
  for (int i = 0; i < 5; ++i) {
    cache.begin_step();
    random_active(rng, kMaxActive, active);
    bad += fetch_and_check(fetcher, 1, active, pack.offsets[1], seen);
  }
  const long before = cache_test::allocations();
  for (int i = 0; i < 60; ++i) {
    const uint32_t layer = i % kLayers;
    cache.begin_step();
    random_active(rng, 1 + rng() % kMaxActive, active);
    bad += fetch_and_check(fetcher, layer, active, pack.offsets[layer], seen);
  }
  const long allocations = cache_test::allocations() - before;
  CHECK(bad == 0);
  CHECK(allocations == 0);
  CHECK(cache.stats().evictions > 0);
}

TEST_CASE("bundle fetcher: bad requests are refused with nothing claimed") {
  const SyntheticPack pack;
  const io_test::TestFile tmp(io_test::disk_dir(), pack.contents);
  const io::DirectFile file = io::DirectFile::open(tmp.path());
  auto reader = make_reader(Backend::Pread, file, 32);
  const CacheLayerShape shapes[] = {{kNff, kBundle, 0}, {kNff, kBundle, 0}, {kNff, kBundle, 0}};
  NeuronCache cache(shapes, 4);
  BundleFetcher fetcher(cache, *reader, file, {.max_active = kMaxActive});
  const auto refused = [&](uint32_t layer, std::vector<int32_t> active, uint64_t offset) -> std::string {
    cache.begin_step();
    try {
      fetcher.fetch(layer, active, offset, [](const FetchedBundle&) {});
    } catch (const std::exception& e) {
      CHECK(cache.pending() == 0);
      cache.check_consistency();
      return e.what();
    }
    return "";
  };
  CHECK(refused(0, {5, 9, 5}, pack.offsets[0]).find("neuron 5 is listed twice") != std::string::npos);
  CHECK(refused(0, {64}, pack.offsets[0]).find("active entry 0: neuron 64 out of range [0, 64)") != std::string::npos);
  CHECK(refused(0, {-1}, pack.offsets[0]).find("out of range") != std::string::npos);
  CHECK(refused(3, {1}, pack.offsets[0]).find("layer 3 out of range") != std::string::npos);
  CHECK(refused(2, {1}, pack.offsets[2] + 1).find("lies outside the file") != std::string::npos);
  CHECK(refused(0, std::vector<int32_t>(21, 0), pack.offsets[0]).find("exceed max_active 20") != std::string::npos);
  // Five misses in one step with four cold slots: a clear error, the claims given back.
  const std::string small = refused(0, {10, 11, 12, 13, 14}, pack.offsets[0]);
  CHECK(small.find("all 4 cold slots are in use by this step") != std::string::npos);
  CHECK(cache.stats().claim_failures == 1);
  // And the next fetch works.
  cache.begin_step();
  std::vector<int> seen(kMaxActive);
  CHECK(fetch_and_check(fetcher, 0, {10, 11, 12, 13}, pack.offsets[0], seen) == 0);
}

namespace {

const std::vector<int32_t> kFaultActive = {60, 1, 39, 20, 40, 41, 63};  // 1 is hot

void fault_on_bundle_range(Backend backend) {
  FaultFixture fx(backend);
  const uint64_t target = fx.fail_bundle(1, 40);
  const std::string msg = fx.failing_fetch(kFaultActive);
  CAPTURE(msg);
  CHECK(msg.find("bundle fetch of layer 1: " + fx.tmp.path() + ": read [") == 0);
  CHECK(msg.find(std::strerror(EIO)) != std::string::npos);
  uint64_t offset = 0, length = 0;
  REQUIRE(parse_range(msg, &offset, &length));
  CHECK(offset <= target);
  CHECK(offset + length >= target + kBundle);
  CHECK(fx.cache.peek(1, 40) == nullptr);
  // Reads that succeeded were committed, with the right bytes.
  for (int32_t n : kFaultActive) {
    if (const uint8_t* d = fx.cache.peek(1, static_cast<uint32_t>(n))) CHECK(bundle_ok(1, n, d));
  }
  CHECK(fx.fetcher->stats().failed_reads >= 1);
  fx.check_recovers(kFaultActive);
}

void fault_on_first_read(Backend backend) {
  FaultFixture fx(backend);
  io::FaultPlan plan;
  plan.fail_nth = static_cast<int64_t>(fx.fault->reads_submitted());
  plan.fail_errno = EIO;
  fx.fault->set_plan(plan);
  const std::string msg = fx.failing_fetch(kFaultActive);
  CAPTURE(msg);
  uint64_t offset = 0, length = 0;
  CHECK(parse_range(msg, &offset, &length));
  CHECK(length % 512 == 0);  // the file's read alignment: 512 or 4096
  fx.check_recovers(kFaultActive);
}

void fault_truncated(Backend backend) {
  FaultFixture fx(backend);
  io::FaultPlan plan;
  plan.short_every = true;
  plan.short_bytes = 0;
  fx.fault->set_plan(plan);
  const std::string msg = fx.failing_fetch(kFaultActive);
  CAPTURE(msg);
  CHECK(msg.find("the file ends before the wanted bytes (truncated file?)") != std::string::npos);
  for (int32_t n : kFaultActive) {
    if (n >= 4) CHECK(fx.cache.peek(1, static_cast<uint32_t>(n)) == nullptr);
  }
  fx.check_recovers(kFaultActive);
}

}  // namespace

TEST_CASE("bundle fetcher: a failed read names the file, offset and length; the cache stays consistent") {
  for (Backend backend : backends("bundle fetcher faults")) {
    CAPTURE(name(backend));
    fault_on_bundle_range(backend);
    fault_on_first_read(backend);
    fault_truncated(backend);
  }
}

namespace {

// Prefetch then fetch, layer by layer, as the decode loop does: the prediction overlaps the real
// active set by about half; every delivered bundle is checked, nothing allocates after warm-up.
void prefetch_steps(Backend backend, uint32_t cold_slots, uint32_t seed) {
  const SyntheticPack pack;
  const io_test::TestFile tmp(io_test::disk_dir(), pack.contents);
  const io::DirectFile file = io::DirectFile::open(tmp.path());
  auto reader = make_reader(backend, file, 32);
  const CacheLayerShape shapes[] = {{kNff, kBundle, 6}, {kNff, kBundle, 0}, {kNff, kBundle, 3}};
  NeuronCache cache(shapes, cold_slots);
  load_hot_prefixes(cache, *reader, file, pack.offsets);
  BundleFetcher fetcher(cache, *reader, file, {.max_active = kMaxActive});
  std::mt19937 rng(seed);
  std::vector<int32_t> predicted, active;
  predicted.reserve(kMaxActive);
  active.reserve(kMaxActive);
  std::vector<int> seen(kMaxActive);
  int bad = 0;
  long allocations = 0;
  for (int token = 0; token < 80; ++token) {
    const long before = cache_test::allocations();
    for (uint32_t l = 0; l < kLayers; ++l) {
      cache.begin_step();
      random_active(rng, 1 + rng() % kMaxActive, predicted);
      fetcher.prefetch(l, predicted, pack.offsets[l]);
      CHECK_FALSE(fetcher.in_progress());
      // The real active set: the first half of the prediction plus fresh neurons.
      active.assign(predicted.begin(), predicted.begin() + static_cast<long>(predicted.size() / 2));
      while (active.size() < kMaxActive / 2 + 1) {
        const auto n = static_cast<int32_t>(rng() % kNff);
        if (std::find(active.begin(), active.end(), n) == active.end()) active.push_back(n);
      }
      cache.begin_step();
      bad += fetch_and_check(fetcher, l, active, pack.offsets[l], seen);
    }
    if (token >= 5) allocations += cache_test::allocations() - before;
  }
  CHECK(bad == 0);
  CHECK(allocations == 0);
  const FetcherStats& fs = fetcher.stats();
  CHECK(fs.prefetches > 0);
  CHECK(fs.prefetched_bundles > 0);
  CHECK(fs.prefetched_used > 0);
  CHECK(fs.prefetched_used <= fs.prefetched_bundles);
  CHECK(fs.prefetch_failed_reads == 0);
  CHECK(fs.bundles_read == cache.stats().commits);  // prefetched bundles count as read
  CHECK(cache.pending() == 0);
  CHECK_FALSE(fetcher.prefetch_in_flight());
  cache.check_consistency();
}

// A failed prefetch read is dropped; the real fetch reads the bundle again and reports the error.
void prefetch_fault(Backend backend) {
  FaultFixture fx(backend);
  fx.fail_bundle(1, 40);
  fx.cache.begin_step();
  fx.fetcher->prefetch(1, kFaultActive, fx.pack.offsets[1]);
  const std::string msg = fx.failing_fetch(kFaultActive);  // drains the prefetch first
  CAPTURE(msg);
  CHECK(msg.find("bundle fetch of layer 1: ") == 0);
  CHECK(fx.fetcher->stats().prefetch_failed_reads == 1);
  CHECK(fx.cache.peek(1, 40) == nullptr);
  fx.check_recovers(kFaultActive);
  // A prefetch left in flight is drained by cancel().
  fx.cache.begin_step();
  const std::vector<int32_t> others = {10, 11, 12, 50};
  fx.fetcher->prefetch(2, others, fx.pack.offsets[2]);
  fx.fetcher->cancel();
  CHECK_FALSE(fx.fetcher->prefetch_in_flight());
  CHECK(fx.cache.pending() == 0);
  CHECK(fx.reader->in_flight() == 0);
  for (int32_t n : others) CHECK(bundle_ok(2, static_cast<uint32_t>(n), fx.cache.peek(2, static_cast<uint32_t>(n))));
  fx.cache.check_consistency();
}

// One prefetch for several layers at once (a mixture's routed experts), then each layer's fetch:
// what the prefetch read is resident for every one of them, counted once as used.
void prefetch_several_layers(Backend backend) {
  const SyntheticPack pack;
  const io_test::TestFile tmp(io_test::disk_dir(), pack.contents);
  const io::DirectFile file = io::DirectFile::open(tmp.path());
  auto reader = make_reader(backend, file, kLayers * kMaxActive);  // one window: room for every read
  const CacheLayerShape shapes[] = {{kNff, kBundle, 0}, {kNff, kBundle, 4}, {kNff, kBundle, 0}};
  NeuronCache cache(shapes, kLayers * kNff);  // room for every bundle: nothing prefetched is evicted
  load_hot_prefixes(cache, *reader, file, pack.offsets);
  BundleFetcher fetcher(cache, *reader, file, {.max_active = kMaxActive, .max_prefetch_layers = kLayers});
  std::mt19937 rng(21);
  std::array<std::vector<int32_t>, kLayers> predicted;
  std::vector<int> seen(kMaxActive);
  int bad = 0;
  long allocations = 0;
  for (int token = 0; token < 40; ++token) {
    const long before = cache_test::allocations();
    std::array<PrefetchRequest, kLayers> requests;
    for (uint32_t l = 0; l < kLayers; ++l) {
      predicted[l].reserve(kMaxActive);
      random_active(rng, 1 + rng() % kMaxActive, predicted[l]);
      requests[l] = PrefetchRequest{l, predicted[l], pack.offsets[l]};
    }
    cache.begin_step();
    fetcher.prefetch(requests);
    for (uint32_t l = 0; l < kLayers; ++l) {
      CHECK((fetcher.prefetch_in_flight() ? fetcher.prefetch_covers(l) : true));
      cache.begin_step();
      bad += fetch_and_check(fetcher, l, predicted[l], pack.offsets[l], seen);
    }
    if (token >= 5) allocations += cache_test::allocations() - before;
  }
  CHECK(bad == 0);
  CHECK(allocations == 0);
  const FetcherStats& fs = fetcher.stats();
  CHECK(fs.prefetched_used > 0);
  // Every bundle was read by a prefetch (the first layer's fetch drains it, the others find theirs
  // resident), and each was asked for once.
  CHECK(fs.bundles_read == fs.prefetched_bundles);
  CHECK(fs.prefetched_used == fs.prefetched_bundles);
  CHECK(cache.pending() == 0);
  cache.check_consistency();

  // Refused: more layers than max_prefetch_layers, and a layer listed twice.
  BundleFetcher one(cache, *reader, file, {.max_active = kMaxActive});
  const std::vector<int32_t> some = {1, 2};
  const PrefetchRequest two[] = {{0, some, pack.offsets[0]}, {1, some, pack.offsets[1]}};
  CHECK_THROWS_AS(one.prefetch(two), std::invalid_argument);
  const PrefetchRequest twice[] = {{2, some, pack.offsets[2]}, {2, some, pack.offsets[2]}};
  CHECK_THROWS_AS(fetcher.prefetch(twice), std::invalid_argument);
  CHECK(cache.pending() == 0);
}

}  // namespace

TEST_CASE("bundle fetcher: one prefetch reads ahead for several layers") {
  for (Backend backend : backends("bundle fetcher multi-layer prefetch")) {
    CAPTURE(name(backend));
    prefetch_several_layers(backend);
  }
}

TEST_CASE("bundle fetcher: prefetched bundles are found by the next fetch; a prefetch never fails a step") {
  for (Backend backend : backends("bundle fetcher prefetch")) {
    CAPTURE(name(backend));
    prefetch_steps(backend, 40, 11);
    // Fewer cold slots than two active sets: the prefetch runs out of slots and stops quietly.
    prefetch_steps(backend, kMaxActive, 12);
    prefetch_fault(backend);
  }
  // Bad requests are refused like begin()'s.
  const SyntheticPack pack;
  const io_test::TestFile tmp(io_test::disk_dir(), pack.contents);
  const io::DirectFile file = io::DirectFile::open(tmp.path());
  auto reader = make_reader(Backend::Pread, file, 8);
  const CacheLayerShape shapes[] = {{kNff, kBundle, 0}};
  NeuronCache cache(shapes, 8);
  BundleFetcher fetcher(cache, *reader, file, {.max_active = kMaxActive});
  const std::vector<int32_t> out_of_range = {1, kNff};
  CHECK_THROWS_AS(fetcher.prefetch(0, out_of_range, pack.offsets[0]), std::invalid_argument);
  CHECK_THROWS_AS(fetcher.prefetch(3, {}, pack.offsets[0]), std::invalid_argument);
  CHECK(cache.pending() == 0);
}

TEST_CASE("hot loader: a failed read is an error naming the range; bad offsets are refused") {
  const SyntheticPack pack;
  const io_test::TestFile tmp(io_test::disk_dir(), pack.contents);
  const io::DirectFile file = io::DirectFile::open(tmp.path());
  io::FaultPlan plan;
  plan.range_begin = pack.offsets[2];
  plan.range_end = pack.offsets[2] + 1;
  io::FaultInjectingReader reader(make_reader(Backend::Pread, file, 8), plan);
  const CacheLayerShape shapes[] = {{kNff, kBundle, 30}, {kNff, kBundle, 30}, {kNff, kBundle, 30}};
  NeuronCache cache(shapes, 4);
  try {
    load_hot_prefixes(cache, reader, file, pack.offsets, 8192);
    FAIL("no error");
  } catch (const FetchError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("loading the hot neurons: " + tmp.path() + ": read [" + std::to_string(pack.offsets[2]) + ", +8192)") == 0);
  }
  CHECK(reader.in_flight() == 0);
  const std::vector<uint64_t> two = {pack.offsets[0], pack.offsets[1]};
  CHECK_THROWS_WITH_AS(load_hot_prefixes(cache, reader, file, two), "hot loader: 2 tensor offsets for 3 layers",
                       std::invalid_argument);
  if (file.is_direct()) {
    const std::vector<uint64_t> misaligned = {pack.offsets[0] + 1, pack.offsets[1], pack.offsets[2]};
    CHECK_THROWS_AS(load_hot_prefixes(cache, reader, file, misaligned), std::invalid_argument);
  }
  reader.set_plan({});
  CHECK(load_hot_prefixes(cache, reader, file, pack.offsets, 8192) >= 90 * kBundle);
  for (uint32_t l = 0; l < kLayers; ++l) CHECK(bundle_ok(l, 29, cache.peek(l, 29)));
}

// A load abandoned on request (SIGTERM while the daemon loads: ModelLoadOptions::checkpoint) stops
// starting reads, waits for those in flight (they write into the cache being freed) and passes the
// checkpoint's exception on unchanged.
TEST_CASE("hot loader: a throwing between_reads stops the load after the reads in flight land") {
  const SyntheticPack pack;
  const io_test::TestFile tmp(io_test::disk_dir(), pack.contents);
  const io::DirectFile file = io::DirectFile::open(tmp.path());
  auto reader = make_reader(Backend::Pread, file, 2);  // few in flight: many rounds
  const CacheLayerShape shapes[] = {{kNff, kBundle, 30}, {kNff, kBundle, 30}, {kNff, kBundle, 30}};
  NeuronCache cache(shapes, 4);
  struct Stop {};
  int calls = 0;
  CHECK_THROWS_AS(load_hot_prefixes(cache, *reader, file, pack.offsets, 4096,
                                    [&] {
                                      if (++calls == 2) throw Stop{};
                                    }),
                  Stop);
  CHECK(calls == 2);  // not called again once it threw
  CHECK(reader->in_flight() == 0);
  // The same cache loads completely afterwards.
  CHECK(load_hot_prefixes(cache, *reader, file, pack.offsets, 4096, [] {}) >= 90 * kBundle);
  for (uint32_t l = 0; l < kLayers; ++l) CHECK(bundle_ok(l, 29, cache.peek(l, 29)));
}
