#include "core/cache/neuron_cache.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/cache/budget_planner.h"
#include "core/util/align.h"

namespace ember::cache {
namespace {

[[noreturn]] void bad_shape(size_t layer, const std::string& problem) {
  throw std::invalid_argument("neuron cache: layer " + std::to_string(layer) + ": " + problem);
}

uint64_t mul_or_throw(uint64_t a, uint64_t b, const char* what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw std::invalid_argument(std::string("neuron cache: ") + what + " overflows");
  return r;
}

uint64_t round_up(uint64_t v, uint64_t a) {
  uint64_t r = 0;
  if (!checked_align_up(v, a, &r)) throw std::invalid_argument("neuron cache: size overflows");
  return r;
}

std::string entry_name(uint32_t layer, uint32_t neuron) {
  return "layer " + std::to_string(layer) + " bundle " + std::to_string(neuron);
}

}  // namespace

NeuronCache::NeuronCache(std::span<const CacheLayerShape> layers, uint32_t cold_slots) {
  if (layers.empty()) throw std::invalid_argument("neuron cache: no layers");
  if (cold_slots > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
    throw std::invalid_argument("neuron cache: " + std::to_string(cold_slots) + " cold slots is too many");
  }
  layers_.resize(layers.size());
  uint64_t map_size = 0, hot_size = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const CacheLayerShape& s = layers[l];
    if (s.n_ff == 0 || s.n_ff > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
      bad_shape(l, "n_ff " + std::to_string(s.n_ff) + " is 0 or too large");
    }
    if (s.bundle_bytes == 0) bad_shape(l, "bundle_bytes is 0");
    if (s.hot > s.n_ff) bad_shape(l, "hot " + std::to_string(s.hot) + " exceeds n_ff " + std::to_string(s.n_ff));
    Layer& layer = layers_[l];
    layer.shape = s;
    layer.map_base = map_size;
    map_size += s.n_ff;
    layer.hot_offset = hot_size;
    layer.hot_capacity = s.hot == 0 ? 0 : round_up(mul_or_throw(s.hot, s.bundle_bytes, "hot bytes"), kHotRegionAlignment);
    hot_size += layer.hot_capacity;
    if (hot_size < layer.hot_capacity) throw std::invalid_argument("neuron cache: hot bytes overflow");
    slot_bytes_ = std::max(slot_bytes_, round_up(s.bundle_bytes, kSlotAlignment));
  }
  const uint64_t cold_bytes = mul_or_throw(cold_slots, slot_bytes_, "cold arena bytes");
  slot_of_.assign(map_size, -1);
  slots_.assign(cold_slots, Slot{});
  cold_ = io::AlignedBuffer(cold_bytes, kHotRegionAlignment);
  hot_ = io::AlignedBuffer(hot_size, kHotRegionAlignment);
}

HotRegion NeuronCache::hot_region(size_t layer) {
  if (layer >= layers_.size()) throw std::out_of_range("neuron cache: layer " + std::to_string(layer) + " out of range");
  const Layer& l = layers_[layer];
  if (l.shape.hot == 0) return {};
  return HotRegion{hot_.data() + l.hot_offset, static_cast<uint64_t>(l.shape.hot) * l.shape.bundle_bytes, l.hot_capacity};
}

void NeuronCache::begin_step() {
  if (++step_ == 0) {
    // Wrapped after 2^32 steps: clear old pins so that none matches a reused step number.
    for (Slot& s : slots_) s.pin_step = 0;
    step_ = 1;
  }
}

void NeuronCache::check_index(uint32_t layer, uint32_t neuron) const {
  if (layer >= layers_.size() || neuron >= layers_[layer].shape.n_ff) {
    throw std::out_of_range("neuron cache: " + entry_name(layer, neuron) + " out of range");
  }
}

const uint8_t* NeuronCache::find(uint32_t layer, uint32_t neuron) {
  check_index(layer, neuron);
  const Layer& l = layers_[layer];
  if (neuron < l.shape.hot) {
    ++stats_.hot_hits;
    return hot_.data() + l.hot_offset + static_cast<uint64_t>(neuron) * l.shape.bundle_bytes;
  }
  const int32_t s = slot_of(layer, neuron);
  if (s >= 0 && slots_[s].state == SlotState::Valid) {
    Slot& slot = slots_[s];
    slot.referenced = true;
    slot.pin_step = step_;
    ++stats_.cold_hits;
    return slot_data(static_cast<uint32_t>(s));
  }
  ++stats_.misses;
  return nullptr;
}

const uint8_t* NeuronCache::peek(uint32_t layer, uint32_t neuron) const {
  check_index(layer, neuron);
  const Layer& l = layers_[layer];
  if (neuron < l.shape.hot) return hot_.data() + l.hot_offset + static_cast<uint64_t>(neuron) * l.shape.bundle_bytes;
  const int32_t s = slot_of(layer, neuron);
  if (s >= 0 && slots_[s].state == SlotState::Valid) return slot_data(static_cast<uint32_t>(s));
  return nullptr;
}

uint8_t* NeuronCache::claim(uint32_t layer, uint32_t neuron) {
  check_index(layer, neuron);
  if (neuron < layers_[layer].shape.hot) throw std::logic_error("neuron cache: claim of hot " + entry_name(layer, neuron));
  if (slot_of(layer, neuron) >= 0) {
    throw std::logic_error("neuron cache: claim of " + entry_name(layer, neuron) +
                           ", which is already resident or claimed (listed twice?)");
  }
  const uint32_t n = static_cast<uint32_t>(slots_.size());
  // Two turns of the hand: the first clears every unpinned reference bit, so the second finds a
  // victim unless every slot is pinned by this step or pending.
  for (uint64_t turn = 0; turn < 2ull * n; ++turn) {
    const uint32_t index = hand_;
    hand_ = hand_ + 1 == n ? 0 : hand_ + 1;
    Slot& s = slots_[index];
    if (s.state == SlotState::Pending) continue;
    if (s.state == SlotState::Valid) {
      if (s.pin_step == step_) continue;
      if (s.referenced) {  // second chance
        s.referenced = false;
        continue;
      }
      slot_of(static_cast<uint32_t>(s.layer), static_cast<uint32_t>(s.neuron)) = -1;
      ++stats_.evictions;
    }
    s = Slot{static_cast<int32_t>(layer), static_cast<int32_t>(neuron), step_, SlotState::Pending, false};
    slot_of(layer, neuron) = static_cast<int32_t>(index);
    ++pending_;
    return slot_data(index);
  }
  ++stats_.claim_failures;
  return nullptr;
}

int32_t NeuronCache::pending_slot(uint32_t layer, uint32_t neuron, const char* op) const {
  check_index(layer, neuron);
  const int32_t s = slot_of(layer, neuron);
  if (s < 0 || slots_[s].state != SlotState::Pending) {
    throw std::logic_error(std::string("neuron cache: ") + op + " of " + entry_name(layer, neuron) + ", which is not claimed");
  }
  return s;
}

const uint8_t* NeuronCache::commit(uint32_t layer, uint32_t neuron) {
  const int32_t s = pending_slot(layer, neuron, "commit");
  Slot& slot = slots_[s];
  slot.state = SlotState::Valid;
  slot.referenced = true;  // just loaded for use: like a page fault in CLOCK, it starts referenced
  --pending_;
  ++stats_.commits;
  stats_.bytes_copied_in += layers_[layer].shape.bundle_bytes;
  return slot_data(static_cast<uint32_t>(s));
}

void NeuronCache::abandon(uint32_t layer, uint32_t neuron) {
  const int32_t s = pending_slot(layer, neuron, "abandon");
  slots_[s] = Slot{};
  slot_of(layer, neuron) = -1;
  --pending_;
  ++stats_.abandons;
}

void NeuronCache::check_consistency() const {
  const auto fail = [](const std::string& what) { throw std::logic_error("neuron cache inconsistent: " + what); };
  uint32_t pending = 0;
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    const std::string name = "slot " + std::to_string(i);
    if (s.state == SlotState::Free) {
      if (s.layer != -1 || s.neuron != -1) fail(name + " is free but names an entry");
      continue;
    }
    if (s.state == SlotState::Pending) ++pending;
    if (s.layer < 0 || static_cast<size_t>(s.layer) >= layers_.size() || s.neuron < 0 ||
        static_cast<uint32_t>(s.neuron) >= layers_[s.layer].shape.n_ff) {
      fail(name + " names an entry out of range");
    }
    if (static_cast<uint32_t>(s.neuron) < layers_[s.layer].shape.hot) fail(name + " holds a hot bundle");
    if (slot_of(static_cast<uint32_t>(s.layer), static_cast<uint32_t>(s.neuron)) != static_cast<int32_t>(i)) {
      fail(name + " is not mapped back from " + entry_name(s.layer, s.neuron));
    }
  }
  if (pending != pending_) fail("pending count " + std::to_string(pending_) + " but " + std::to_string(pending) + " pending slots");
  for (uint32_t l = 0; l < layers_.size(); ++l) {
    for (uint32_t k = 0; k < layers_[l].shape.n_ff; ++k) {
      const int32_t s = slot_of(l, k);
      if (s == -1) continue;
      if (s < 0 || static_cast<size_t>(s) >= slots_.size()) fail(entry_name(l, k) + " maps to a bad slot");
      if (slots_[s].layer != static_cast<int32_t>(l) || slots_[s].neuron != static_cast<int32_t>(k)) {
        fail(entry_name(l, k) + " maps to slot " + std::to_string(s) + ", which holds another entry");
      }
    }
  }
}

}  // namespace ember::cache
