#pragma once
// Routing statistics of a mixture of experts, from the router logits that sparse_reference.h
// records: the ones Mixtral's paper reports (arXiv 2401.04088, sec. 5), shared by tests/synth and
// bench/synth_measure.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/synth/sparse_reference.h"

namespace ember::test {

struct RouterStats {
  std::vector<double> load;      // share of the (token, picked expert) pairs per expert; sums to 1
  double max_load = 0;           // the largest share times n_experts (1: perfectly even)
  double min_load = 0;           // the smallest share times n_experts
  double top1_prob = 0;          // mean softmax probability (over all experts) of the first choice
  double repeat_first = 0;       // consecutive tokens with the same first choice (chance: 1/n_experts)
  double repeat_any = 0;         // consecutive tokens sharing a picked expert (chance for 2 of 8: 0.46)
  // The spread over experts of the mean logit, over the mean spread of a logit over tokens: a
  // large value means a fixed bias per expert, i.e. a direction common to all tokens that the
  // router reads.
  double bias_ratio = 0;
};

inline RouterStats router_stats(const std::vector<std::vector<float>>& logits, int64_t n_used) {
  RouterStats s;
  const size_t T = logits.size(), E = logits.at(0).size();
  s.load.assign(E, 0.0);
  std::vector<double> mean(E, 0.0), sq(E, 0.0);
  std::vector<std::vector<int64_t>> picks(T);
  for (size_t t = 0; t < T; ++t) {
    const auto& z = logits[t];
    for (const auto& [e, w] : route_ref(z, n_used)) picks[t].push_back(e), s.load[e] += 1.0 / double(T * n_used);
    const float mx = *std::max_element(z.begin(), z.end());
    double total = 0;
    for (float v : z) total += std::exp(double(v - mx));
    s.top1_prob += 1.0 / total / double(T);
    for (size_t e = 0; e < E; ++e) mean[e] += z[e] / double(T), sq[e] += double(z[e]) * z[e] / double(T);
  }
  s.max_load = *std::max_element(s.load.begin(), s.load.end()) * double(E);
  s.min_load = *std::min_element(s.load.begin(), s.load.end()) * double(E);
  for (size_t t = 1; t < T; ++t) {
    s.repeat_first += picks[t][0] == picks[t - 1][0] ? 1.0 / double(T - 1) : 0.0;
    bool shared = false;
    for (int64_t a : picks[t])
      shared = shared || std::find(picks[t - 1].begin(), picks[t - 1].end(), a) != picks[t - 1].end();
    s.repeat_any += shared ? 1.0 / double(T - 1) : 0.0;
  }
  double grand = 0, spread_of_means = 0, token_spread = 0;
  for (size_t e = 0; e < E; ++e) grand += mean[e] / double(E);
  for (size_t e = 0; e < E; ++e) {
    spread_of_means += (mean[e] - grand) * (mean[e] - grand) / double(E);
    token_spread += std::sqrt(std::max(0.0, sq[e] - mean[e] * mean[e])) / double(E);
  }
  s.bias_ratio = std::sqrt(spread_of_means) / token_spread;
  return s;
}

}  // namespace ember::test
