#pragma once
// How an inference context runs the FFN of decode steps (one token at a time). Prefill always runs
// dense: with many tokens per step nearly every neuron fires for some token, and the dense
// matrix-matrix kernels reuse each weight across the batch.
#include <cmath>
#include <limits>
#include <vector>

namespace ember {

struct SparseOptions {
  enum class Mode {
    Dense,      // the dense FFN (the reference path)
    Oracle,     // ReLU-family models: the exact active set, taken from the dense gate (and, for
                // dReLU, the dense up); results equal dense up to float rounding. For tests.
    Predictor,  // PowerInfer predictor: neuron i runs when (fc2 · relu(fc1 · x))[i] > threshold,
                // x = residual stream before ffn_norm. Needs blk.N.fc1/fc2.weight in the model.
    Threshold,  // CATS (arXiv 2404.08763), training-free: gate computed densely, up and down only
                // for neurons with |act(gate)| >= the layer's threshold.
  };
  Mode mode = Mode::Dense;
  // Predictor: replaces the file's powerinfer.sparse_threshold when not NaN.
  // Threshold: the threshold of every layer when layer_thresholds is empty.
  float threshold_override = std::numeric_limits<float>::quiet_NaN();
  // Threshold mode: one threshold per layer (n_layer values, e.g. calibrated by `ember profile`).
  std::vector<float> layer_thresholds;
  // Threshold mode without thresholds (layer_thresholds empty, threshold_override NaN): skip this
  // fraction of neurons in every token, those of smallest |act(gate)| (a per-token quantile, so
  // the fraction is met exactly without calibration). In [0, 1).
  float target_sparsity = 0.0f;
  // Also compute the dense gate (and up) to count the true active set: predictor recall and
  // precision in the counters. Costs a dense gate/up per token; for measurement, not for speed.
  bool diagnostics = false;
};

const char* sparse_mode_name(SparseOptions::Mode mode);
// "dense", "oracle", "predictor", "threshold" -> mode; false for anything else.
bool parse_sparse_mode(const char* name, SparseOptions::Mode* mode);

}  // namespace ember
