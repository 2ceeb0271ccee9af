#include "core/model/ffn_setup.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/model/ffn_counters.h"
#include "core/model/ffn_dense.h"
#include "core/model/ffn_moe.h"
#include "core/model/ffn_moe_offloaded.h"
#include "core/model/ffn_moe_sparse.h"
#include "core/model/ffn_observed.h"
#include "core/model/ffn_offloaded.h"
#include "core/model/ffn_selectors.h"
#include "core/model/ffn_sparse.h"

namespace ember {

using Mode = SparseOptions::Mode;

void check_sparse_options(const SparseOptions& o, const ModelConfig& c, const ModelWeights& w, bool offloaded,
                          bool observed) {
  if (c.is_moe()) {
    // Sparse experts run in memory (oracle, predictor); a memory budget needs a pack of experts.
    if (o.mode == Mode::Threshold) {
      throw std::invalid_argument("sparse mode threshold is not supported on mixture-of-experts models; "
                                  "use predictor or oracle");
    }
    if (o.mode != Mode::Dense && !w.has_down_t()) {
      throw std::invalid_argument("sparse modes on a mixture of experts need each expert's neuron-major down "
                                  "projection (blk.N.ffn_down_t_exps.weight or blk.N.ffn_down_t.E.weight); this model has none");
    }
    if (o.mode == Mode::Dense && o.diagnostics) {
      throw std::invalid_argument("sparse diagnostics on a mixture of experts need a sparse mode (oracle, predictor)");
    }
  }
  if (o.mode == Mode::Oracle && !is_relu_family(c.activation)) {
    throw std::invalid_argument("sparse mode oracle needs a ReLU-family FFN (relu, drelu); this model's is " +
                                std::string(activation_name(c.activation)));
  }
  if (o.mode == Mode::Predictor && !w.has_predictor()) {
    throw std::invalid_argument("sparse mode predictor needs predictor tensors (blk.N.fc1.weight, blk.N.fc2.weight); "
                                "this model has none");
  }
  if (!o.layer_thresholds.empty() && static_cast<int64_t>(o.layer_thresholds.size()) != c.n_layer) {
    throw std::invalid_argument("sparse: " + std::to_string(o.layer_thresholds.size()) +
                                " layer thresholds given, the model has " + std::to_string(c.n_layer) + " layers");
  }
  for (float t : o.layer_thresholds) {
    if (!std::isfinite(t)) throw std::invalid_argument("sparse: layer thresholds must be finite numbers");
  }
  if (!std::isnan(o.threshold_override) && !std::isfinite(o.threshold_override)) {
    throw std::invalid_argument("sparse: threshold must be a finite number (or NaN for the model's)");
  }
  if (!(o.target_sparsity >= 0.0f && o.target_sparsity < 1.0f)) {
    throw std::invalid_argument("sparse: target sparsity must be in [0, 1)");
  }
  if (!offloaded) return;
  // Under a memory budget the FFN weights are read on demand: only what needs no dense gate.
  if (o.mode == Mode::Oracle || o.mode == Mode::Threshold) {
    throw std::invalid_argument(std::string("sparse mode ") + (o.mode == Mode::Oracle ? "oracle" : "threshold") +
                                " computes every neuron's gate, which a memory budget keeps on storage; "
                                "use the predictor mode or dense");
  }
  if (o.diagnostics) {
    throw std::invalid_argument("sparse diagnostics (recall, precision) compute the dense FFN alongside; "
                                "they need the whole model in memory (no memory budget)");
  }
  if (observed) throw std::invalid_argument("profiling needs the whole model in memory (no memory budget)");
}

std::vector<float> layer_thresholds(const SparseOptions& o, const ModelConfig& c) {
  if (!o.layer_thresholds.empty()) return o.layer_thresholds;
  float uniform = o.threshold_override;
  if (std::isnan(uniform) && o.mode == Mode::Predictor) uniform = c.sparse_threshold;
  return std::vector<float>(static_cast<size_t>(c.n_layer), uniform);
}

uint64_t FfnStrategies::scratch_bytes() const {
  uint64_t bytes = 0;
  for (const auto& s : owned) bytes += s->scratch_bytes();
  return bytes;
}

namespace {

template <class T, class... Args>
T& add(FfnStrategies& s, Args&&... args) {
  auto p = std::make_unique<T>(std::forward<Args>(args)...);
  T& ref = *p;
  s.owned.push_back(std::move(p));
  return ref;
}

// Decode steps under a memory budget: dense (streamed) or the predictor through the neuron cache.
void choose_offloaded(FfnStrategies& s, const FfnEnv& env, const FfnChoice& ch) {
  OffloadedDenseFfn& dense = add<OffloadedDenseFfn>(s, env, *ch.offload);
  s.batch = s.decode = &dense;
  if (ch.sparse.mode != Mode::Predictor) return;  // check_sparse_options left dense or predictor
  FfnStrategy& sparse = ch.offload->prefetch_enabled()
                            ? static_cast<FfnStrategy&>(add<PrefetchingSparseFfn>(s, env, *ch.offload, ch.thresholds, dense))
                            : add<OffloadedSparseFfn>(s, env, *ch.offload, ch.thresholds, dense);
  s.decode = &add<CountedFfn>(s, sparse, ch.stats, env.c.n_ff);
}

std::unique_ptr<ActiveSelector> make_selector(const FfnEnv& env, const FfnChoice& ch) {
  switch (ch.sparse.mode) {
    case Mode::Oracle: return std::make_unique<OracleSelector>(env);
    case Mode::Predictor: return std::make_unique<PredictorSelector>(env, ch.thresholds);
    case Mode::Threshold: {
      // No threshold for a layer (NaN): the per-token quantile of the target sparsity.
      const bool quantile = ch.sparse.layer_thresholds.empty() && std::isnan(ch.sparse.threshold_override);
      return std::make_unique<ThresholdSelector>(env, ch.thresholds, quantile, ch.sparse.target_sparsity);
    }
    case Mode::Dense: break;
  }
  throw std::logic_error("make_selector: the dense mode has no selector");
}

}  // namespace

FfnStrategies choose_ffn(const FfnEnv& env, const FfnChoice& ch) {
  FfnStrategies s;
  if (env.c.is_moe() && ch.offload != nullptr) {  // check_sparse_options left dense and predictor
    s.batch = s.decode = &add<OffloadedMoeFfn>(s, env, *ch.offload, ch.routes);
    if (ch.sparse.mode != Mode::Predictor) return s;
    FfnStrategy& sparse = add<OffloadedSparseMoeFfn>(s, env, *ch.offload, ch.thresholds, ch.routes);
    s.decode = &add<CountedFfn>(s, sparse, ch.stats, env.c.n_ff * env.c.n_expert_used);
    return s;
  }
  if (env.c.is_moe()) {  // check_sparse_options left dense, oracle and predictor
    s.batch = s.decode = &add<MoeFfn>(s, env, ch.routes, ch.observer);
    if (ch.sparse.mode == Mode::Dense) return s;
    const std::span<SparseLayerStats> audit = ch.sparse.diagnostics ? ch.stats : std::span<SparseLayerStats>{};
    FfnStrategy& sparse = add<SparseMoeFfn>(s, env, ch.sparse.mode, ch.thresholds, audit, ch.routes);
    s.decode = &add<CountedFfn>(s, sparse, ch.stats, env.c.n_ff * env.c.n_expert_used);
    return s;
  }
  if (ch.offload != nullptr) {
    choose_offloaded(s, env, ch);
    return s;
  }
  DenseFfn& dense = add<DenseFfn>(s, env);
  s.batch = ch.observer != nullptr ? &add<ObservedFfn>(s, dense, *ch.observer, env) : static_cast<FfnStrategy*>(&dense);
  if (ch.sparse.mode == Mode::Dense && !ch.sparse.diagnostics) {
    s.decode = s.batch;  // uncounted decode steps are seen by the observer like prompt batches
    return s;
  }
  FfnStrategy* inner = &dense;
  if (ch.sparse.mode != Mode::Dense) inner = &add<SparseFfn>(s, env, make_selector(env, ch), dense);
  if (ch.sparse.diagnostics) inner = &add<AuditedFfn>(s, *inner, ch.stats, env);
  s.decode = &add<CountedFfn>(s, *inner, ch.stats, env.c.n_ff);
  return s;
}

}  // namespace ember
