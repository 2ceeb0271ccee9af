// cache::NeuronCache: hits and misses, CLOCK second chance, pinned hot bundles, slots in use by the
// current step, claim/commit/abandon consistency, statistics, and no allocation after construction.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/cache/neuron_cache.h"
#include "tests/cache/allocation_counter.h"

using namespace ember::cache;

namespace {

// Layer 0: 16 bundles of 100 bytes, the first 4 hot. Layer 1: 16 bundles of 100 bytes, none hot.
NeuronCache small_cache(uint32_t cold_slots) {
  const CacheLayerShape shapes[] = {{16, 100, 4}, {16, 100, 0}};
  return NeuronCache(shapes, cold_slots);
}

// Loads (layer, neuron) through claim + commit, filling the bundle with a byte derived from it.
const uint8_t* load(NeuronCache& c, uint32_t layer, uint32_t neuron) {
  uint8_t* dst = c.claim(layer, neuron);
  REQUIRE(dst != nullptr);
  std::memset(dst, static_cast<int>(layer * 16 + neuron), 100);
  return c.commit(layer, neuron);
}

}  // namespace

TEST_CASE("neuron cache: shapes, hot regions and slot sizes") {
  NeuronCache c = small_cache(4);
  CHECK(c.n_layers() == 2);
  CHECK(c.cold_slots() == 4);
  CHECK(c.slot_bytes() == 128);  // 100 rounded up to 64
  CHECK(c.cold_arena_bytes() == 4 * 128);
  const HotRegion h0 = c.hot_region(0);
  CHECK(h0.bytes == 400);
  CHECK(h0.capacity == 4096);
  CHECK(reinterpret_cast<uintptr_t>(h0.data) % 4096 == 0);
  CHECK(c.hot_region(1).data == nullptr);
  CHECK_THROWS_AS(c.hot_region(2), std::out_of_range);

  const CacheLayerShape too_hot[] = {{4, 100, 5}};
  CHECK_THROWS_WITH_AS(NeuronCache(too_hot, 1), "neuron cache: layer 0: hot 5 exceeds n_ff 4", std::invalid_argument);
  const CacheLayerShape zero[] = {{4, 0, 0}};
  CHECK_THROWS_AS(NeuronCache(zero, 1), std::invalid_argument);
}

TEST_CASE("neuron cache: hot hits, misses, claim/commit and statistics") {
  NeuronCache c = small_cache(4);
  const HotRegion h0 = c.hot_region(0);
  std::memset(h0.data, 0x5A, h0.bytes);
  const uint8_t* hot = c.find(0, 3);
  CHECK(hot == h0.data + 300);
  CHECK(hot[99] == 0x5A);
  CHECK(c.stats().hot_hits == 1);

  CHECK(c.find(0, 5) == nullptr);
  CHECK(c.stats().misses == 1);
  uint8_t* dst = c.claim(0, 5);
  REQUIRE(dst != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(dst) % 64 == 0);
  CHECK(c.pending() == 1);
  CHECK(c.find(0, 5) == nullptr);  // invisible until committed
  std::memset(dst, 7, 100);
  CHECK(c.commit(0, 5) == dst);
  CHECK(c.pending() == 0);
  CHECK(c.find(0, 5) == dst);
  CHECK(c.stats().cold_hits == 1);
  CHECK(c.stats().misses == 2);
  CHECK(c.stats().bytes_copied_in == 100);
  CHECK(c.stats().commits == 1);
  CHECK(c.stats().hit_rate() == doctest::Approx(2.0 / 4.0));

  CHECK_THROWS_AS(c.claim(0, 2), std::logic_error);   // hot
  CHECK_THROWS_AS(c.claim(0, 5), std::logic_error);   // resident
  CHECK_THROWS_AS(c.commit(1, 5), std::logic_error);  // never claimed
  CHECK_THROWS_AS(c.abandon(1, 5), std::logic_error);
  CHECK_THROWS_AS(c.find(2, 0), std::out_of_range);
  CHECK_THROWS_AS(c.find(0, 16), std::out_of_range);
  c.check_consistency();
}

TEST_CASE("neuron cache: CLOCK gives referenced bundles a second chance") {
  NeuronCache c = small_cache(4);
  for (uint32_t n = 0; n < 4; ++n) load(c, 1, n);  // slots 0..3 hold A..D (layer 1, neurons 0..3)
  c.begin_step();
  // Every slot is referenced (just loaded): one turn clears the bits, then A (slot 0) goes.
  load(c, 1, 4);
  CHECK(c.peek(1, 0) == nullptr);
  CHECK(c.stats().evictions == 1);
  c.begin_step();
  CHECK(c.find(1, 1) != nullptr);  // B referenced again; C and D are not
  c.begin_step();                  // B is no longer pinned, only referenced
  load(c, 1, 5);                   // the hand is at B: second chance, so C goes
  CHECK(c.peek(1, 1) != nullptr);
  CHECK(c.peek(1, 2) == nullptr);
  CHECK(c.peek(1, 3) != nullptr);
  CHECK(c.stats().evictions == 2);
  c.check_consistency();
}

TEST_CASE("neuron cache: slots in use by the current step are never evicted") {
  NeuronCache c = small_cache(4);
  for (uint32_t n = 0; n < 4; ++n) load(c, 1, n);
  // Same step: all four are pinned, so there is no victim.
  CHECK(c.claim(1, 9) == nullptr);
  CHECK(c.stats().claim_failures == 1);
  CHECK(c.pending() == 0);
  c.check_consistency();

  c.begin_step();
  CHECK(c.find(1, 2) != nullptr);  // pins neuron 2 for this step
  CHECK(c.find(1, 0) != nullptr);  // and 0
  // Two victims exist (1 and 3); a third claim in this step must fail, not evict 0 or 2.
  REQUIRE(c.claim(1, 10) != nullptr);
  REQUIRE(c.claim(1, 11) != nullptr);
  CHECK(c.claim(1, 12) == nullptr);
  CHECK(c.peek(1, 0) != nullptr);
  CHECK(c.peek(1, 2) != nullptr);
  c.commit(1, 10);
  c.abandon(1, 11);
  c.check_consistency();
  c.begin_step();
  CHECK(c.claim(1, 12) != nullptr);  // the abandoned slot is free again
  c.commit(1, 12);
  c.check_consistency();
}

TEST_CASE("neuron cache: pending slots survive new steps; abandon keeps the cache consistent") {
  NeuronCache c = small_cache(2);
  uint8_t* a = c.claim(1, 7);
  REQUIRE(a != nullptr);
  c.begin_step();
  load(c, 1, 8);
  c.begin_step();
  load(c, 1, 9);  // must evict 8, never the pending 7
  CHECK(c.peek(1, 8) == nullptr);
  CHECK(c.pending() == 1);
  c.abandon(1, 7);
  CHECK(c.peek(1, 7) == nullptr);
  CHECK(c.find(1, 7) == nullptr);
  CHECK(c.pending() == 0);
  CHECK(c.stats().abandons == 1);
  c.check_consistency();
  c.begin_step();
  load(c, 1, 7);  // the same bundle can be claimed again
  CHECK(c.peek(1, 7)[0] == 16 + 7);
  c.check_consistency();
}

TEST_CASE("neuron cache: random steps never evict hot or in-use bundles and allocate nothing") {
  const CacheLayerShape shapes[] = {{64, 200, 8}, {64, 200, 0}, {64, 120, 16}};
  NeuronCache c(shapes, 24);
  for (uint32_t l = 0; l < 3; ++l) {
    const HotRegion h = c.hot_region(l);
    for (uint64_t i = 0; i < h.bytes; ++i) h.data[i] = static_cast<uint8_t>(l * 31 + i / shapes[l].bundle_bytes);
  }
  std::mt19937 rng(42);
  std::vector<std::pair<uint32_t, uint32_t>> in_use;
  in_use.reserve(64);
  bool ok = true;
  const long before = ember::cache_test::allocations();
  for (int step = 0; step < 2000; ++step) {
    c.begin_step();
    in_use.clear();
    const uint32_t layer = rng() % 3;
    const uint32_t n_active = 1 + rng() % 20;  // <= 24 cold slots
    for (uint32_t k = 0; k < n_active; ++k) {
      const uint32_t neuron = std::min(rng() % 64, rng() % 64);  // skewed towards the hot end
      bool listed = false;
      for (const auto& e : in_use) listed |= e.second == neuron;
      if (listed) continue;
      const uint8_t* data = c.find(layer, neuron);
      if (data == nullptr) {
        uint8_t* dst = c.claim(layer, neuron);
        if (dst == nullptr) {
          ok = false;
          break;
        }
        if (rng() % 10 == 0) {  // a failed read
          c.abandon(layer, neuron);
          continue;
        }
        std::memset(dst, static_cast<int>(layer * 97 + neuron), shapes[layer].bundle_bytes);
        data = c.commit(layer, neuron);
      }
      in_use.emplace_back(layer, neuron);
    }
    // Everything used this step is still resident with its contents.
    for (const auto& [l, n] : in_use) {
      const uint8_t* d = c.peek(l, n);
      const uint8_t want = n < shapes[l].hot ? static_cast<uint8_t>(l * 31 + n) : static_cast<uint8_t>(l * 97 + n);
      if (d == nullptr || d[0] != want || d[shapes[l].bundle_bytes - 1] != want) ok = false;
    }
  }
  const long allocations = ember::cache_test::allocations() - before;
  CHECK(ok);
  CHECK(allocations == 0);
  CHECK(c.stats().evictions > 0);
  CHECK(c.stats().cold_hits > 0);
  CHECK(c.stats().hot_hits > 0);
  CHECK(c.pending() == 0);
  c.check_consistency();
}
