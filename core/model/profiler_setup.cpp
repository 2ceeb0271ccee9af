#include "core/model/profiler_setup.h"

#include <algorithm>

namespace ember {

ProfilerSetup profiler_setup_for(const Model& model, int64_t max_tokens) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  ProfilerSetup s;
  s.act = c.activation;
  // A mixture of experts is profiled per (layer, expert) unit, u = layer * n_expert + expert.
  s.n_layer = c.n_layer * std::max<int64_t>(1, c.n_expert);
  s.n_embd = c.n_embd;
  s.n_ff = c.n_ff;
  s.max_tokens = max_tokens;
  if (w.has_predictor()) {
    for (const LayerWeights& L : w.layers) {
      if (!c.is_moe()) {
        s.fc1.push_back(L.pred_fc1);
        s.fc2.push_back(L.pred_fc2);
      }
      for (const ExpertWeights& ex : L.experts) {
        s.fc1.push_back(ex.pred_fc1);
        s.fc2.push_back(ex.pred_fc2);
      }
    }
    s.predictor_threshold = c.sparse_threshold;
  }
  return s;
}

}  // namespace ember
