#pragma once
// Choosing a context's FFN strategies, once, from its options (ffn_strategy.h): the checks that the
// sparse settings fit the model, the per-layer thresholds, and which strategies (with which
// decorators) run prompt batches and decode steps.
#include <memory>
#include <span>
#include <vector>

#include "core/cache/offloaded_ffn.h"
#include "core/model/ffn_moe.h"
#include "core/model/ffn_strategy.h"
#include "core/sparse/ffn_observer.h"
#include "core/sparse/sparse_options.h"
#include "core/sparse/sparse_stats.h"

namespace ember {

// Throws std::invalid_argument when the options do not fit the model (oracle on a SiLU model,
// predictor without predictor tensors, wrong number of layer thresholds, ...) or the memory
// budget (`offloaded`: only dense and predictor, no diagnostics, no observer).
void check_sparse_options(const SparseOptions& o, const ModelConfig& c, const ModelWeights& w, bool offloaded,
                          bool observed);

// The threshold of each layer: explicit per-layer values, else the override, else (predictor) the
// file's powerinfer.sparse_threshold or (threshold mode) NaN for the per-token quantile.
std::vector<float> layer_thresholds(const SparseOptions& o, const ModelConfig& c);

struct FfnChoice {
  const SparseOptions& sparse;
  std::span<const float> thresholds;  // layer_thresholds(), kept by the caller
  FfnObserver* observer = nullptr;    // sees the dense FFN's gate/up, or each routed expert's (not owned)
  OffloadedFfn* offload = nullptr;    // the model's neuron cache under a memory budget, or null
  std::span<SparseLayerStats> stats;  // per layer, counted on decode steps when a sparse mode or
                                      // diagnostics is on
  MoeRouteObserver* routes = nullptr; // sees a mixture of experts' routing (not owned)
};

struct FfnStrategies {
  FfnStrategy* batch = nullptr;   // prompt batches (more than one token)
  FfnStrategy* decode = nullptr;  // decode steps (one token)
  std::vector<std::unique_ptr<FfnStrategy>> owned;
  uint64_t scratch_bytes() const;
};

// A model without ffn_down_t builds its transposed down copy here (once per model) when a sparse
// mode runs in RAM.
FfnStrategies choose_ffn(const FfnEnv& env, const FfnChoice& choice);

}  // namespace ember
