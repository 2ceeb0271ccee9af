#pragma once
// The neuron cache: where a layer's FFN bundles live in memory under a memory budget.
//
// - Hot bundles (each layer's prefix of `hot` bundles, chosen by the planner) are pinned for the
//   cache's life in one contiguous region per layer, laid out as in the file (bundle k at
//   k * bundle_bytes), so the prefix is filled by a few large sequential reads (hot_loader.h) and
//   the kernels can address it with row_stride = bundle_bytes like the all-in-RAM pack.
// - Cold bundles share one pool of slots across all layers (slot_bytes = the largest bundle rounded
//   up to 64), evicted by CLOCK (second chance): a hit sets the slot's reference bit, the clock hand
//   clears it once before evicting. Cheaper than LRU (no list splicing per hit) and close to it.
// - A slot is pinned for the current step (begin_step()): every slot found or claimed since the
//   last begin_step() is never evicted, so the bundles a layer is computing stay put while its
//   missing bundles are claimed. The caller starts a step per layer (or per token, if the pool can
//   hold every layer's active set).
// - A missing bundle is claim()ed (a victim slot, returned to copy into), then commit()ed (visible
//   to find()) or abandon()ed (a failed read): a failed read never leaves a half-written entry.
//
// All memory (maps, slots, hot regions) is allocated by the constructor; nothing after. Not
// thread-safe: one decode thread owns it.
#include <cstdint>
#include <span>
#include <vector>

#include "io/file.h"

namespace ember::cache {

struct CacheLayerShape {
  uint32_t n_ff = 0;          // bundles of the layer
  uint64_t bundle_bytes = 0;  // bytes of one bundle
  uint32_t hot = 0;           // pinned prefix length (<= n_ff)
};

struct NeuronCacheStats {
  uint64_t hot_hits = 0;      // find() answered from a hot region
  uint64_t cold_hits = 0;     // find() answered from a cold slot
  uint64_t misses = 0;        // find() returned null
  uint64_t evictions = 0;     // valid cold entries replaced by claim()
  uint64_t commits = 0;
  uint64_t abandons = 0;
  uint64_t claim_failures = 0;  // claim() found every slot pinned or pending
  uint64_t bytes_copied_in = 0; // bundle bytes committed into cold slots

  uint64_t lookups() const { return hot_hits + cold_hits + misses; }
  double hit_rate() const { return lookups() ? static_cast<double>(hot_hits + cold_hits) / lookups() : 0.0; }
};

// The file range of a layer's hot prefix and where it goes.
struct HotRegion {
  uint8_t* data = nullptr;  // kHotRegionAlignment-aligned; null when hot == 0
  uint64_t bytes = 0;       // hot * bundle_bytes: the bytes to read from the bundle tensor's start
  uint64_t capacity = 0;    // bytes rounded up to 4096, so an O_DIRECT read of the last block fits
};

class NeuronCache {
 public:
  // Throws std::invalid_argument naming the layer (n_ff 0 or above INT32_MAX, bundle_bytes 0,
  // hot > n_ff) or when the sizes overflow.
  NeuronCache(std::span<const CacheLayerShape> layers, uint32_t cold_slots);
  NeuronCache(const NeuronCache&) = delete;
  NeuronCache& operator=(const NeuronCache&) = delete;

  size_t n_layers() const { return layers_.size(); }
  const CacheLayerShape& layer(size_t l) const { return layers_[l].shape; }
  uint32_t cold_slots() const { return static_cast<uint32_t>(slots_.size()); }
  uint64_t slot_bytes() const { return slot_bytes_; }
  // The cold arena (e.g. for BatchReader::register_arena if reads ever land in slots directly).
  uint8_t* cold_arena() { return cold_.data(); }
  size_t cold_arena_bytes() const { return cold_.size(); }
  uint64_t hot_bytes_total() const { return hot_.size(); }

  // Where to load layer l's hot prefix: read HotRegion::bytes from the bundle tensor's start.
  HotRegion hot_region(size_t layer);

  // Starts a new step: slots pinned by earlier steps become evictable again.
  void begin_step();

  // The bundle, or null when it is not resident. A cold hit sets the reference bit and pins the
  // slot for this step. Counts hits and misses. Throws std::out_of_range for a bad layer/neuron.
  const uint8_t* find(uint32_t layer, uint32_t neuron);
  // The same without side effects (no stats, no reference bit, no pin): for tests and diagnostics.
  const uint8_t* peek(uint32_t layer, uint32_t neuron) const;

  // Takes a slot for a missing cold bundle (evicting by CLOCK) and returns where its bundle_bytes go;
  // the entry stays invisible to find() until commit(). Returns null when every slot is pinned by
  // this step or pending (the pool is smaller than the step's active set: a planning error).
  // Throws std::logic_error when the bundle is hot, resident or already claimed (e.g. a neuron listed
  // twice), std::out_of_range for a bad layer/neuron.
  uint8_t* claim(uint32_t layer, uint32_t neuron);
  // Makes a claimed bundle visible; returns its data. Throws std::logic_error when it is not claimed.
  const uint8_t* commit(uint32_t layer, uint32_t neuron);
  // Gives a claimed slot back (its read failed): the bundle stays missing, the slot becomes free.
  void abandon(uint32_t layer, uint32_t neuron);

  // Claimed and neither committed nor abandoned (0 between fetches when the caller is correct).
  uint32_t pending() const { return pending_; }
  const NeuronCacheStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  // Checks the internal invariants (map <-> back map agree, pending count, states); throws
  // std::logic_error describing the first violation. O(slots + neurons): for tests.
  void check_consistency() const;

 private:
  enum class SlotState : uint8_t { Free, Pending, Valid };
  struct Slot {
    int32_t layer = -1;
    int32_t neuron = -1;
    uint32_t pin_step = 0;  // pinned while == step_
    SlotState state = SlotState::Free;
    bool referenced = false;
  };
  struct Layer {
    CacheLayerShape shape;
    uint64_t map_base = 0;  // index of neuron 0 in slot_of_
    uint64_t hot_offset = 0;
    uint64_t hot_capacity = 0;
  };

  void check_index(uint32_t layer, uint32_t neuron) const;
  int32_t& slot_of(uint32_t layer, uint32_t neuron) { return slot_of_[layers_[layer].map_base + neuron]; }
  int32_t slot_of(uint32_t layer, uint32_t neuron) const { return slot_of_[layers_[layer].map_base + neuron]; }
  uint8_t* slot_data(uint32_t slot) { return cold_.data() + static_cast<uint64_t>(slot) * slot_bytes_; }
  const uint8_t* slot_data(uint32_t slot) const { return cold_.data() + static_cast<uint64_t>(slot) * slot_bytes_; }
  int32_t pending_slot(uint32_t layer, uint32_t neuron, const char* op) const;

  std::vector<Layer> layers_;
  std::vector<int32_t> slot_of_;  // per (layer, neuron): cold slot or -1 (hot neurons: unused, -1)
  std::vector<Slot> slots_;       // the back map: slot -> (layer, neuron), state
  uint64_t slot_bytes_ = 0;
  io::AlignedBuffer cold_;
  io::AlignedBuffer hot_;
  uint32_t hand_ = 0;  // the clock hand
  uint32_t step_ = 1;
  uint32_t pending_ = 0;
  NeuronCacheStats stats_;
};

}  // namespace ember::cache
