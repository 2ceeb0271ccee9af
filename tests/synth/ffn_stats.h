#pragma once
// Statistics of the FFN activations that sparse_reference.h records, on a text shaped like greedy
// output of the synthetic grammar: shared by tests/synth and bench/synth_measure.cpp, which reports
// them for any model (the big presets are too slow for a test).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <vector>

#include "tests/synth/sparse_reference.h"

namespace ember::test {

// Tokens of a "generated" text: the successor chain of the synthetic grammar with an occasional
// jump, as greedy decoding produces it.
inline std::vector<int32_t> chain_text(int n, int32_t n_vocab) {
  uint64_t a = 7919;
  while (std::gcd(a, static_cast<uint64_t>(n_vocab)) != 1) a += 2;
  std::vector<int32_t> t{1, 300};
  uint64_t jump = 12345;
  while (static_cast<int>(t.size()) < n) {
    const auto last = static_cast<uint64_t>(t.back());
    jump = jump * 6364136223846793005ull + 1442695040888963407ull;
    if ((jump >> 60) == 0) t.push_back(static_cast<int32_t>(3 + (jump >> 20) % (n_vocab - 3)));
    else t.push_back(static_cast<int32_t>((last * a + 1) % static_cast<uint64_t>(n_vocab)));
  }
  return t;
}

struct LayerStats {
  double inactive = 0;      // mean fraction of neurons with a zero activation per token
  double hot20_share = 0;   // share of all activations carried by the 20% most frequent neurons
  double recall = 1, precision = 1;
  double jaccard_next = 0;  // active-set overlap of consecutive tokens
  double jaccard_far = 0;   // ... of tokens 16 apart
};

inline double jaccard(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  size_t inter = 0, uni = 0;
  for (size_t i = 0; i < a.size(); ++i) inter += a[i] && b[i], uni += a[i] || b[i];
  return uni ? double(inter) / double(uni) : 1.0;
}

// The statistics of one FFN's records ([position][neuron]; for an expert, the positions routed to
// it, so "consecutive" there means consecutive among those).
inline LayerStats ffn_stats(const std::vector<std::vector<float>>& gate, const std::vector<std::vector<float>>& up,
                            const std::vector<std::vector<float>>& score, bool drelu, float threshold = 0.0f) {
  LayerStats s;
  const size_t T = gate.size(), n = gate[0].size();
  std::vector<double> count(n, 0.0);
  std::vector<std::vector<uint8_t>> active(T, std::vector<uint8_t>(n));
  size_t n_active = 0, tp = 0, n_pred = 0;
  for (size_t t = 0; t < T; ++t)
    for (size_t i = 0; i < n; ++i) {
      const bool on = gate[t][i] > 0.0f && (!drelu || up[t][i] > 0.0f);
      active[t][i] = on;
      n_active += on;
      count[i] += on;
      if (!score.empty()) {
        const bool pred = score[t][i] > threshold;
        n_pred += pred;
        tp += pred && on;
      }
    }
  s.inactive = 1.0 - double(n_active) / double(T * n);
  std::sort(count.begin(), count.end(), std::greater<>());
  s.hot20_share = std::accumulate(count.begin(), count.begin() + static_cast<long>(n / 5), 0.0) /
                  std::max(1.0, std::accumulate(count.begin(), count.end(), 0.0));
  if (!score.empty()) {
    s.recall = double(tp) / double(std::max<size_t>(1, n_active));
    s.precision = double(tp) / double(std::max<size_t>(1, n_pred));
  }
  size_t pairs_near = 0, pairs_far = 0;
  for (size_t t = 8; t + 1 < T; ++t) s.jaccard_next += jaccard(active[t], active[t + 1]), ++pairs_near;
  for (size_t t = 8; t + 16 < T; ++t) s.jaccard_far += jaccard(active[t], active[t + 16]), ++pairs_far;
  s.jaccard_next /= double(std::max<size_t>(1, pairs_near));
  s.jaccard_far /= double(std::max<size_t>(1, pairs_far));
  return s;
}

inline LayerStats layer_stats(const test::FfnTrace& tr, size_t l, bool drelu, float threshold = 0.0f) {
  return ffn_stats(tr.gate[l], tr.up[l], tr.score[l], drelu, threshold);
}

// Expert e of layer l at the positions routed to it (a mixture of sparse experts); an expert never
// routed has no statistics (routed == false).
struct ExpertStats {
  bool routed = false;
  size_t tokens = 0;
  LayerStats s;
};

inline ExpertStats expert_stats(const test::FfnTrace& tr, size_t l, size_t e, bool drelu, float threshold = 0.0f) {
  const auto& r = tr.experts[l][e];
  ExpertStats x;
  x.tokens = r.positions.size();
  x.routed = x.tokens > 0;
  if (x.routed) x.s = ffn_stats(r.gate, r.up, r.score, drelu, threshold);
  return x;
}

}  // namespace ember::test
