#pragma once
// The steps every mixture-of-experts strategy shares (ffn_moe*.h): routing a batch of tokens and
// asking one expert's predictor which of its neurons will fire.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/model/ffn_strategy.h"
#include "core/util/clock.h"

namespace ember {

// Sees the routing of every step (the profiler's routing statistics). Not owned by the FFN.
class MoeRouteObserver {
 public:
  virtual ~MoeRouteObserver() = default;
  // chosen: n rows of k expert ids (most probable first), weights alike.
  virtual void on_routed(int64_t layer, int64_t n, int64_t k, const int32_t* chosen, const float* weights) = 0;
};

// The router's logits for n tokens (n rows of n_expert), each token's k experts and gate weights
// (n rows of k, moe_router.h), shown to the observer when there is one.
void route_tokens(const FfnEnv& env, int64_t layer, const float* x, int64_t n, float* logits, int32_t* chosen,
                  float* weights, MoeRouteObserver* observer);

// Expert ex's predicted active neurons for one token (residual: the stream before ffn_norm, as
// PowerInfer's predictors are trained): their ids, ascending, into active (n_ff); returns how many.
// hidden (the expert's rank) and scores (n_ff) are scratch.
int64_t predict_expert(const FfnEnv& env, const ExpertWeights& ex, const float* residual, float threshold,
                       float* hidden, float* scores, int32_t* active);

// One decode token through a mixture: route() picks its k experts; mix() then runs each of them
// (most probable first) and sums their outputs weighted by the gate weights. The sparse strategies
// (in RAM, offloaded) differ only in how they run one expert. Sized once; no allocation per step.
class TokenMixture {
 public:
  explicit TokenMixture(const ModelConfig& c)
      : logits_(static_cast<size_t>(c.n_expert), 0.0f),
        chosen_(static_cast<size_t>(c.n_expert_used), 0),
        weights_(static_cast<size_t>(c.n_expert_used), 0.0f),
        expert_out_(static_cast<size_t>(c.n_embd), 0.0f) {}
  uint64_t bytes() const {
    return (logits_.size() + weights_.size() + expert_out_.size()) * sizeof(float) + chosen_.size() * sizeof(int32_t);
  }
  // x: the token's FFN input (n_embd).
  void route(const FfnEnv& env, int64_t layer, const float* x, MoeRouteObserver* observer) {
    route_tokens(env, layer, x, 1, logits_.data(), chosen_.data(), weights_.data(), observer);
  }
  // The routed experts, most probable first (after route()).
  std::span<const int32_t> chosen() const { return chosen_; }
  // out (n_embd) = sum over the routed experts of weight * run_expert(expert, expert_out), where
  // run_expert writes the expert's output into expert_out and returns the neurons it computed;
  // report.n_active gets their sum and report.select_ns the routing time.
  template <class RunExpert>
  void mix(const FfnEnv& env, int64_t layer, const float* x, MoeRouteObserver* observer, float* out,
           FfnStepReport& report, RunExpert&& run_expert) {
    const uint64_t t0 = now_ns();
    route(env, layer, x, observer);
    report.select_ns += now_ns() - t0;
    std::fill(out, out + env.c.n_embd, 0.0f);
    report.n_active = 0;
    for (size_t j = 0; j < chosen_.size(); ++j) {
      report.n_active += run_expert(chosen_[j], expert_out_.data());
      const float w = weights_[j];
      for (int64_t d = 0; d < env.c.n_embd; ++d) out[d] += w * expert_out_[static_cast<size_t>(d)];
    }
  }

 private:
  std::vector<float> logits_;      // (n_expert)
  std::vector<int32_t> chosen_;    // (k)
  std::vector<float> weights_;     // (k)
  std::vector<float> expert_out_;  // (n_embd)
};

}  // namespace ember
