#pragma once
// A mixture-of-experts FFN with every weight in memory (Mixtral's): the router's logits for each
// token, its k experts (moe_router.h), and the sum of those experts' SwiGLU-shaped FFNs weighted
// by the gate weights. Tokens are grouped by expert, so a prompt batch reads each routed expert's
// weights once per layer (one matmul over all of its tokens), and an expert no token chose is not
// read at all.
#include <cstdint>
#include <vector>

#include "core/model/ffn_strategy.h"
#include "core/sparse/ffn_observer.h"

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

class MoeFfn : public FfnStrategy {
 public:
  // Allocates its scratch for as many tokens as the env's gate rows hold. `neurons` (the
  // profiler) sees each routed expert's gate and up rows before the activation, as the
  // observation of unit layer * n_expert + expert over that expert's tokens, in order. Neither
  // observer is owned.
  explicit MoeFfn(const FfnEnv& env, MoeRouteObserver* observer = nullptr, FfnObserver* neurons = nullptr);
  void run(int64_t layer, const FfnIo& io, FfnStepReport& report) override;
  uint64_t scratch_bytes() const override;

 private:
  // Fills chosen_/weights_ for io's tokens and groups them by expert (by_expert_, first_).
  void route(int64_t layer, const FfnIo& io);
  void run_expert(int64_t layer, int64_t expert, const FfnIo& io, int64_t begin, int64_t end);
  void observe_expert(int64_t layer, int64_t expert, const FfnIo& io, int64_t begin, int64_t m);

  FfnEnv env_;
  MoeRouteObserver* observer_;
  FfnObserver* neurons_;
  int64_t max_tokens_;
  std::vector<float> logits_;      // (max_tokens, n_expert)
  std::vector<int32_t> chosen_;    // (max_tokens, k)
  std::vector<float> weights_;     // (max_tokens, k)
  std::vector<int32_t> first_;     // (n_expert + 1): expert e's slots are by_expert_[first_[e], first_[e+1])
  std::vector<int32_t> by_expert_; // (max_tokens * k) slots t * k + j, grouped by expert, tokens ascending
  std::vector<float> xe_, ye_;     // (max_tokens, n_embd): one expert's gathered inputs and outputs
  std::vector<float> re_;          // (max_tokens, n_embd) its tokens' residual rows; only with `neurons`
};

}  // namespace ember
