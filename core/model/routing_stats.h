#pragma once
// Routing statistics of a mixture-of-experts model over a text, the numbers that decide how an
// expert cache behaves: how evenly the experts are loaded, and how often consecutive tokens go to
// the same experts (Mixtral of Experts, arXiv 2401.04088, section 5, reports both for Mixtral).
#include <cstdint>
#include <vector>

#include "core/model/moe_steps.h"

namespace ember {

struct LayerRoutingStats {
  std::vector<uint64_t> expert_slots;  // (n_expert) how often each expert was chosen
  uint64_t tokens = 0;
  uint64_t pairs = 0;         // consecutive tokens seen (within a sequence)
  uint64_t top1_repeats = 0;  // ... whose first choices are the same expert
  uint64_t overlaps = 0;      // ... whose chosen sets share an expert

  // The busiest and the idlest expert's share of the slots, relative to the uniform 1 / n_expert.
  double max_load() const;
  double min_load() const;
  double top1_repeat_rate() const { return pairs ? static_cast<double>(top1_repeats) / static_cast<double>(pairs) : 0.0; }
  double overlap_rate() const { return pairs ? static_cast<double>(overlaps) / static_cast<double>(pairs) : 0.0; }
};

class RoutingStats : public MoeRouteObserver {
 public:
  RoutingStats(int64_t n_layer, int64_t n_expert, int64_t k);
  void on_routed(int64_t layer, int64_t n, int64_t k, const int32_t* chosen, const float* weights) override;
  // The next token starts a new sequence: it is not paired with the one before.
  void sequence_break();

  const std::vector<LayerRoutingStats>& layers() const { return layers_; }
  // What independent, uniform routing would give: 1 / n_expert, and 1 - C(n-k, k) / C(n, k).
  double chance_top1_repeat() const;
  double chance_overlap() const;

 private:
  int64_t n_expert_, k_;
  std::vector<LayerRoutingStats> layers_;
  std::vector<int32_t> previous_;  // (n_layer, k) the last token's choice; -1: none yet
};

}  // namespace ember
