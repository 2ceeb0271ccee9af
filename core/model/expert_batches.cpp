#include "core/model/expert_batches.h"

#include <algorithm>
#include <cstring>

namespace ember {
namespace {

size_t sz(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

}  // namespace

ExpertBatches::ExpertBatches(const FfnEnv& env)
    : env_(env), max_tokens_(static_cast<int64_t>(env.gate.size()) / env.c.n_ff) {
  const int64_t k = env.c.n_expert_used;
  logits_.assign(sz(max_tokens_, env.c.n_expert), 0.0f);
  chosen_.assign(sz(max_tokens_, k), 0);
  weights_.assign(sz(max_tokens_, k), 0.0f);
  first_.assign(static_cast<size_t>(env.c.n_expert) + 1, 0);
  by_expert_.assign(sz(max_tokens_, k), 0);
  xe_.assign(sz(max_tokens_, env.c.n_embd), 0.0f);
  ye_.assign(sz(max_tokens_, env.c.n_embd), 0.0f);
}

uint64_t ExpertBatches::bytes() const {
  return (logits_.size() + weights_.size() + xe_.size() + ye_.size()) * sizeof(float) +
         (chosen_.size() + first_.size() + by_expert_.size()) * sizeof(int32_t);
}

void ExpertBatches::route(int64_t layer, const float* x, int64_t n, MoeRouteObserver* observer) {
  const int64_t n_expert = env_.c.n_expert, k = env_.c.n_expert_used;
  route_tokens(env_, layer, x, n, logits_.data(), chosen_.data(), weights_.data(), observer);
  // A counting sort of the slots by expert: each expert's tokens stay in ascending order.
  std::fill(first_.begin(), first_.end(), 0);
  for (int64_t s = 0; s < n * k; ++s) ++first_[static_cast<size_t>(chosen_[static_cast<size_t>(s)]) + 1];
  for (int64_t e = 0; e < n_expert; ++e) first_[static_cast<size_t>(e) + 1] += first_[static_cast<size_t>(e)];
  for (int64_t s = 0; s < n * k; ++s) {
    const auto e = static_cast<size_t>(chosen_[static_cast<size_t>(s)]);
    by_expert_[static_cast<size_t>(first_[e]++)] = static_cast<int32_t>(s);
  }
  // first_[e] now holds the end of expert e's slots: shift back to get the starts.
  for (int64_t e = n_expert; e > 0; --e) first_[static_cast<size_t>(e)] = first_[static_cast<size_t>(e) - 1];
  first_[0] = 0;
}

const float* ExpertBatches::gather(int64_t expert, const float* rows, int64_t width) {
  gather_into(expert, rows, width, xe_.data());
  return xe_.data();
}

void ExpertBatches::gather_into(int64_t expert, const float* rows, int64_t width, float* dst) const {
  const int64_t k = env_.c.n_expert_used, begin = first_[static_cast<size_t>(expert)];
  for (int64_t i = 0; i < tokens_of(expert); ++i) {
    const int64_t t = by_expert_[static_cast<size_t>(begin + i)] / k;
    std::memcpy(dst + i * width, rows + t * width, sz(width, 1) * sizeof(float));
  }
}

void ExpertBatches::scatter_add(int64_t expert, float* out) const {
  const int64_t E = env_.c.n_embd, k = env_.c.n_expert_used, begin = first_[static_cast<size_t>(expert)];
  for (int64_t i = 0; i < tokens_of(expert); ++i) {
    const int64_t slot = by_expert_[static_cast<size_t>(begin + i)];
    const float w = weights_[static_cast<size_t>(slot)];
    float* o = out + (slot / k) * E;
    const float* y = &ye_[sz(i, E)];
    for (int64_t d = 0; d < E; ++d) o[d] += w * y[d];
  }
}

}  // namespace ember
