#include "core/cache/prefix_frequencies.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace ember::cache {

void prefix_plan_frequencies(std::span<const float> live, std::span<float> out) {
  if (live.size() != out.size()) {
    throw std::invalid_argument("prefix_plan_frequencies: " + std::to_string(live.size()) + " values in, " +
                                std::to_string(out.size()) + " out");
  }
  for (size_t k = 0; k < live.size(); ++k) {
    if (!(live[k] >= 0.0f && live[k] <= 1.0f)) {
      throw std::invalid_argument("prefix_plan_frequencies: value " + std::to_string(k) + " is " + std::to_string(live[k]) +
                                  " (must be in [0, 1])");
    }
  }
  // Pool adjacent violators: a stack of blocks, each the mean of a run of inputs. A new value
  // that is above the block before it violates "non-increasing", so the two merge into their
  // mean, which may in turn be above the block before: merge again. Each value merges once: O(n).
  // Runs at re-planning time, not per token, so the stack may allocate.
  struct Block {
    double sum;
    size_t n;
  };
  std::vector<Block> blocks;
  blocks.reserve(live.size());
  for (float v : live) {
    blocks.push_back({v, 1});
    while (blocks.size() >= 2) {
      const Block& b = blocks.back();
      Block& a = blocks[blocks.size() - 2];
      // mean(a) < mean(b), compared without dividing.
      if (a.sum * static_cast<double>(b.n) >= b.sum * static_cast<double>(a.n)) break;
      a.sum += b.sum;
      a.n += b.n;
      blocks.pop_back();
    }
  }
  // Written only now, so out may alias live. Rounding each mean to float is monotone, so the
  // output stays non-increasing; a mean of values in [0, 1] stays in [0, 1].
  size_t k = 0;
  for (const Block& b : blocks) {
    const float mean = static_cast<float>(b.sum / static_cast<double>(b.n));
    for (size_t i = 0; i < b.n; ++i) out[k++] = mean;
  }
}

}  // namespace ember::cache
