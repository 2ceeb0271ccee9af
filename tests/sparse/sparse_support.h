#pragma once
// Greedy (or teacher-forced) decoding with a chosen sparse mode, keeping every step's logits, for comparisons.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/model/inference_context.h"
#include "core/model/text_evaluation.h"

namespace ember::test {

struct GreedyRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // after the prompt, then after each generated token
  SparseLayerStats totals;
  std::vector<SparseLayerStats> layers;
};

inline int32_t argmax(const float* v, int64_t n) { return static_cast<int32_t>(std::max_element(v, v + n) - v); }

inline GreedyRun greedy_run(const Model& model, ThreadPool& pool, const SparseOptions& sparse,
                            const std::vector<int32_t>& prompt, int n_tokens,
                            const std::vector<int32_t>* forced = nullptr) {
  ContextOptions o;
  o.n_ctx = 256;
  o.sparse = sparse;
  InferenceContext ctx(model, pool, o);
  const int64_t V = model.config().n_vocab;
  GreedyRun run;
  const float* logits = ctx.eval(prompt);
  for (int i = 0; i < n_tokens; ++i) {
    run.logits.emplace_back(logits, logits + V);
    // Teacher forcing: follow another run's tokens, so logits compare position by position.
    const int32_t t = forced ? (*forced)[static_cast<size_t>(i)] : argmax(logits, V);
    run.tokens.push_back(t);
    logits = ctx.eval(std::vector<int32_t>{t});
  }
  run.totals = ctx.sparse_totals();
  run.layers = ctx.sparse_stats();
  return run;
}

inline float max_logit_diff(const GreedyRun& a, const GreedyRun& b) {
  float d = 0.0f;
  for (size_t s = 0; s < a.logits.size() && s < b.logits.size(); ++s)
    for (size_t i = 0; i < a.logits[s].size(); ++i) d = std::max(d, std::fabs(a.logits[s][i] - b.logits[s][i]));
  return d;
}

// Mean KL(dense || other) of the softmax distributions and top-1 agreement, over the steps (the
// KL of core/model/text_evaluation, which `ember eval` reports).
inline void kl_and_top1(const GreedyRun& dense, const GreedyRun& other, double* kl, double* top1) {
  double sum_kl = 0.0;
  int agree = 0;
  const size_t steps = std::min(dense.logits.size(), other.logits.size());
  for (size_t s = 0; s < steps; ++s) {
    const auto& p = dense.logits[s];
    const auto& q = other.logits[s];
    const auto n = static_cast<int64_t>(p.size());
    sum_kl += kl_divergence(p.data(), q.data(), n);
    agree += argmax(p.data(), n) == argmax(q.data(), n) ? 1 : 0;
  }
  *kl = steps ? sum_kl / static_cast<double>(steps) : 0.0;
  *top1 = steps ? static_cast<double>(agree) / static_cast<double>(steps) : 1.0;
}

}  // namespace ember::test
