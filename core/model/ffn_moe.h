#pragma once
// A mixture-of-experts FFN with every weight in memory (Mixtral's): the router's logits for each
// token, its k experts (moe_router.h), and the sum of those experts' SwiGLU-shaped FFNs weighted
// by the gate weights. Tokens are grouped by expert, so a prompt batch reads each routed expert's
// weights once per layer (one matmul over all of its tokens), and an expert no token chose is not
// read at all.
#include <cstdint>
#include <vector>

#include "core/model/expert_batches.h"
#include "core/model/ffn_strategy.h"
#include "core/model/moe_steps.h"
#include "core/sparse/ffn_observer.h"

namespace ember {

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
  void run_expert(int64_t layer, int64_t expert, const FfnIo& io);
  void observe_expert(int64_t layer, int64_t expert, const FfnIo& io);

  FfnEnv env_;
  MoeRouteObserver* observer_;
  FfnObserver* neurons_;
  ExpertBatches batches_;
  std::vector<float> re_;  // (max_tokens, n_embd) an expert's tokens' residual rows; only with `neurons`
};

}  // namespace ember
