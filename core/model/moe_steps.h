#pragma once
// The steps every mixture-of-experts strategy shares (ffn_moe*.h): routing a batch of tokens and
// asking one expert's predictor which of its neurons will fire.
#include <cstdint>

#include "core/model/ffn_strategy.h"

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

}  // namespace ember
