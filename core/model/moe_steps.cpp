#include "core/model/moe_steps.h"

#include "core/model/moe_router.h"
#include "core/sparse/predictor.h"

namespace ember {

void route_tokens(const FfnEnv& env, int64_t layer, const float* x, int64_t n, float* logits, int32_t* chosen,
                  float* weights, MoeRouteObserver* observer) {
  const int64_t n_expert = env.c.n_expert, k = env.c.n_expert_used;
  ffn_matmul(env, env.w.layers[static_cast<size_t>(layer)].ffn_gate_inp, x, n, logits);
  for (int64_t t = 0; t < n; ++t) route_token(logits + t * n_expert, n_expert, k, chosen + t * k, weights + t * k);
  if (observer != nullptr) observer->on_routed(layer, n, k, chosen, weights);
}

int64_t predict_expert(const FfnEnv& env, const ExpertWeights& ex, const float* residual, float threshold,
                       float* hidden, float* scores, int32_t* active) {
  PredictorArgs p;
  p.fc1 = ex.pred_fc1;
  p.fc2 = ex.pred_fc2;
  p.x = residual;
  p.threshold = threshold;
  p.hidden = hidden;
  p.scores = scores;
  p.active = active;
  return predict_active_neurons(p, env.pool, env.mm);
}

}  // namespace ember
