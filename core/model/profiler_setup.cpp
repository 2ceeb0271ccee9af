#include "core/model/profiler_setup.h"

namespace ember {

ProfilerSetup profiler_setup_for(const Model& model, int64_t max_tokens) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  ProfilerSetup s;
  s.act = c.activation;
  s.n_layer = c.n_layer;
  s.n_embd = c.n_embd;
  s.n_ff = c.n_ff;
  s.max_tokens = max_tokens;
  if (w.has_predictor()) {
    for (const LayerWeights& L : w.layers) {
      s.fc1.push_back(L.pred_fc1);
      s.fc2.push_back(L.pred_fc2);
    }
    s.predictor_threshold = c.sparse_threshold;
  }
  return s;
}

}  // namespace ember
