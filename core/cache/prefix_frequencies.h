#pragma once
// Live frequencies -> planner input. plan_budget needs each layer's frequencies non-increasing
// along the pack's order, because a layer's hot set is a prefix of its bundle tensor (one
// sequential read, no index). Live traffic (ActivationTracker) is not monotone in that order: the
// pack was ordered by an offline profile, and bundle 900 may now be hotter than bundle 10.
//
// Since only prefixes can be hot, what matters is the value of a prefix of length k: the sum S(k)
// of its live frequencies. The planner's greedy (the next bundle with the most expected hits per
// byte) picks the best prefix lengths when every S is concave, i.e. when the marginal values are
// non-increasing. The fit below replaces S by its least concave majorant: the non-increasing
// least-squares (isotonic) fit of the frequencies, computed by pool-adjacent-violators, whose
// values are the slopes of that majorant. Each maximal run of equal fitted values (a "block")
// carries the mean of its live frequencies, so the fit equals S at every block boundary. Hence:
//   - the fit is non-increasing, keeps the total (and every block boundary's prefix sum), and
//     equals the input where the input is already non-increasing;
//   - the greedy over the fitted values maximises the majorant; whenever every layer's chosen
//     length is a block boundary, that is exactly the best prefix allocation for the live values
//     (no prefix choice does better); a layer cut inside a block (at the budget's edge) may get
//     less than the majorant promised for it (the fit has no way to say where in a block the
//     hot bundles sit).
// A hot bundle behind cold ones in the pack's order pulls its block's value up, so the planner
// extends that layer's prefix over the cold ones if the whole block is worth its bytes.
#include <span>

namespace ember::cache {

// out[k] = the non-increasing isotonic fit of live[k]. live and out have the same size and may be
// the same span. Throws std::invalid_argument when the sizes differ or a value is NaN or outside
// [0, 1] (the fit of values in [0, 1] stays in [0, 1], as plan_budget requires). O(n).
void prefix_plan_frequencies(std::span<const float> live, std::span<float> out);

}  // namespace ember::cache
