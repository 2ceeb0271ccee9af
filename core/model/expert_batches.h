#pragma once
// A batch of tokens routed to experts and grouped by expert (Mixtral's gating, moe_router.h):
// route() fills each token's k experts and gate weights and groups the (token, expert) slots by
// expert; gather(e) copies expert e's tokens' input rows together, so one matmul per projection
// serves all of them; scatter_add(e) adds the expert's weighted outputs back to their tokens.
// Sized once for the env's batch; nothing allocates per step.
#include <cstdint>
#include <vector>

#include "core/model/moe_steps.h"

namespace ember {

class ExpertBatches {
 public:
  explicit ExpertBatches(const FfnEnv& env);
  uint64_t bytes() const;

  // Routes n tokens (x: n rows of n_embd, the FFN input) of `layer`; the observer sees the routing.
  void route(int64_t layer, const float* x, int64_t n, MoeRouteObserver* observer);
  int64_t tokens_of(int64_t expert) const {
    return first_[static_cast<size_t>(expert) + 1] - first_[static_cast<size_t>(expert)];
  }
  // Expert e's tokens' rows of `rows` (n rows of `width` floats), packed: tokens_of(e) rows.
  const float* gather(int64_t expert, const float* rows, int64_t width);
  // The same into dst (tokens_of(e) rows of width floats).
  void gather_into(int64_t expert, const float* rows, int64_t width, float* dst) const;
  // Where an expert's outputs go: tokens_of(e) rows of n_embd, in gather's order.
  float* outputs() { return ye_.data(); }
  // out[t] += gate weight * outputs() row, for each of expert e's tokens t (out: n rows of n_embd).
  void scatter_add(int64_t expert, float* out) const;

 private:
  FfnEnv env_;
  int64_t max_tokens_;
  std::vector<float> logits_;      // (max_tokens, n_expert)
  std::vector<int32_t> chosen_;    // (max_tokens, k)
  std::vector<float> weights_;     // (max_tokens, k)
  std::vector<int32_t> first_;     // (n_expert + 1): expert e's slots are by_expert_[first_[e], first_[e+1])
  std::vector<int32_t> by_expert_; // (max_tokens * k) slots t * k + j, grouped by expert, tokens ascending
  std::vector<float> xe_, ye_;     // (max_tokens, n_embd)
};

}  // namespace ember
