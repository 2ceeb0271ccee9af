#pragma once
// The memory-budget planner: splits a budget into what must stay resident (a number the caller
// computes: attention, norms, predictors, embeddings, output head), pinned hot neurons per layer,
// and a global pool of cold cache slots. A pure function over plain numbers, so core/cache needs
// neither the model nor the sparse code.
//
// Hot neurons: a pack stores each layer's bundles hottest first, so a layer's hot set is a prefix
// of its bundle tensor (one sequential read at start, no index). The planner takes neurons across
// all layers in order of expected hits per byte (frequency / bundle_bytes), each layer only in
// prefix order, until the budget less the cold-slot reserve (and the locality share, see
// locality_tokens) is spent; what is left becomes extra cold slots.
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ember::cache {

// Hot regions are read with O_DIRECT straight into memory, so each is rounded up to this.
inline constexpr uint64_t kHotRegionAlignment = 4096;
// Cold slots are bundle_bytes rounded up to this (cache-line aligned bundles for the kernels).
inline constexpr uint64_t kSlotAlignment = 64;

struct LayerPlanInput {
  uint32_t n_ff = 0;          // neurons (bundles) of the layer
  uint64_t bundle_bytes = 0;  // bytes of one bundle
  // (n_ff) activation frequency of bundle k in [0, 1], in the pack's order: non-increasing.
  std::span<const float> frequency;
  // Cold slots this layer needs to run one step: its most active neurons per token (e.g. the
  // predictor's maximum, or n_ff for a dense step). Clamped to n_ff.
  uint32_t min_cold_slots = 0;
};

struct BudgetPlanInput {
  uint64_t budget_bytes = 0;
  uint64_t resident_bytes = 0;  // everything that stays resident besides the FFN bundles
  std::vector<LayerPlanInput> layers;
  // How many layers' active sets must be in the cache at once: 1 when the caller starts a new cache
  // step per layer (NeuronCache::begin_step), 2 when it prefetches layer L+1 during layer L. The cold
  // reserve is the sum of the largest `pinned_layers` per-layer minimums.
  uint32_t pinned_layers = 1;
  // Token-to-token locality: a cold neuron that fired for one of the last few tokens is likely to
  // fire again soon, and the CLOCK pool of cold slots turns those re-uses into hits. With a value
  // T > 0 the pool grows towards T tokens' worth of cold activations (T x the expected activations
  // per token of the neurons left cold, from the frequencies), taking bytes from the hot prefixes,
  // at most half of what the budget leaves after the resident bytes and the reserve. 0: the pool is
  // the reserve plus whatever the hot prefixes leave over. (mistral-7b drelu pack at a 50 % budget:
  // hit rate 87.7 % with the bare reserve of one layer's slots, 89.2-89.3 % with 2-3 layers' worth,
  // 86.6 % with 8; T = 5 gave 1.8 layers and 89.2 %, T = 8 3.9 layers and 89.1 %. OffloadOptions
  // uses 6.)
  double locality_tokens = 0.0;
};

struct BudgetPlan {
  std::vector<uint32_t> hot;       // per layer: the hot prefix length (pinned bundles)
  std::vector<uint64_t> hot_bytes; // per layer: hot * bundle_bytes rounded up to kHotRegionAlignment
  uint32_t cold_slots = 0;         // the global pool
  // Expected activations per token of the neurons left cold (sum of their frequencies): the misses
  // a cache without locality would see.
  double cold_activations_per_token = 0.0;
  uint64_t slot_bytes = 0;         // max bundle_bytes rounded up to kSlotAlignment
  uint64_t resident_bytes = 0;
  uint64_t hot_total_bytes = 0;
  uint64_t cold_total_bytes = 0;   // cold_slots * slot_bytes
  uint64_t total_bytes = 0;        // resident + hot + cold <= budget
  uint64_t minimum_bytes = 0;      // the smallest budget that runs at all
  // Share of all activations (by the profile) that land on hot neurons: a lower bound of the hit
  // rate (cold slots add hits on top). 0 when the profile has no activations.
  double hot_activation_share = 0.0;
};

// The budget cannot hold the resident bytes plus the cold-slot reserve.
class BudgetTooSmall : public std::invalid_argument {
 public:
  BudgetTooSmall(const std::string& message, uint64_t minimum_bytes)
      : std::invalid_argument(message), minimum_bytes_(minimum_bytes) {}
  uint64_t minimum_bytes() const { return minimum_bytes_; }

 private:
  uint64_t minimum_bytes_;
};

// Throws BudgetTooSmall (message: the minimum in bytes and MiB) or std::invalid_argument naming the
// layer and the problem (no layers, n_ff 0, bundle_bytes 0, frequency size != n_ff, a frequency
// outside [0, 1] or NaN, frequencies increasing along the pack's order, sizes overflowing).
BudgetPlan plan_budget(const BudgetPlanInput& input);

// "4G", "512M", "100K", "1.5G", "4GiB", "4096" (bytes), "50%" / "12.5%" of model_file_bytes. Suffixes
// K, M, G, T are binary (1024) and case-insensitive, optionally followed by "B" or "iB". Throws
// std::invalid_argument naming the text: empty, junk, zero, overflow, a percentage above 100 or of an
// unknown (0) file size.
uint64_t parse_memory_budget(std::string_view text, uint64_t model_file_bytes);

// "123456789 bytes (117.7 MiB)", for messages.
std::string format_bytes(uint64_t bytes);

}  // namespace ember::cache
