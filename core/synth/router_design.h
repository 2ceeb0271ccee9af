#pragma once
// The routers of the synthetic mixtures of experts (blk.N.ffn_gate_inp.weight, one row per expert;
// always F32, as llama.cpp writes them). They decide the routing statistics that the engine's MoE
// path (expert caching, offloading, prefetching) is measured against, so they aim at Mixtral's
// (arXiv 2401.04088, sec. 5): every expert of a layer chosen about equally often, consecutive
// tokens sharing their first choice more often than the 1/n_experts chance rate but far from
// always, and a softmax that is neither flat nor one-hot.
//
// Row e of layer l is a random direction that leans on the slow dimensions of the token
// embedding (kRouterSlowShare), with the components along the layer's common input directions
// removed (see router_design.cpp for which and why), scaled to a fixed norm:
//   logit_e = r_e . h,  h = RMSNorm(x) * ffn_norm.weight, |h| ~ sqrt(n_embd),
// so for an input spread evenly over directions the logits have a standard deviation of |r_e|,
// whatever n_embd is.
#include <cstdint>

#include "core/synth/synth_shape.h"

namespace ember::synth {

// The standard deviation of a router logit across tokens. With 8 experts and Gaussian logits,
// 1.6 makes the top-1 softmax probability ~0.5 on average (0.36 at 1.0: near flat, 0.69 at 3.0:
// near one-hot); Mixtral's routers give their first choice ~0.4-0.6.
inline constexpr float kRouterLogitStd = 1.6f;

// The share of a router row's squared norm on the embedding's slow dimensions (sparse_weights.h:
// consecutive tokens of a greedy text share them), the rest on the others. Learned routers are
// local because neighbouring tokens are alike (same language, same code block); here the slow
// dimensions are what neighbours have in common, so this share sets how often consecutive tokens
// keep their first choice. 0.5 reads every dimension alike, and since half of each embedding is
// slow, already repeats the first choice ~30% of the time; 0.3 gives ~22% on moe-tiny (F32
// reference pass, chain text), within Mixtral's 14-28% and well above the 12.5% chance rate.
inline constexpr float kRouterSlowShare = 0.3f;

// Fills rows [row_begin, row_end) of a Router spec (row r is expert r of layer spec.layer).
void generate_router_rows(const TensorSpec& spec, uint64_t seed, uint64_t row_begin, uint64_t row_end, float* out);

}  // namespace ember::synth
