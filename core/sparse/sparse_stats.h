#pragma once
// Cumulative counters of one FFN layer across the decode steps of an inference context.
#include <cstdint>

namespace ember {

struct SparseLayerStats {
  uint64_t tokens = 0;          // decode steps counted
  uint64_t neurons = 0;         // tokens * n_ff: the neurons a dense FFN would compute
  uint64_t active = 0;          // neurons the sparse FFN computed (predicted / selected active)
  // Diagnostics only (SparseOptions::diagnostics): neurons whose true activation is non-zero,
  // and how many of those were among the computed ones.
  uint64_t truly_active = 0;
  uint64_t true_positive = 0;
  // Wall time per part of the layer (decode steps only), nanoseconds.
  uint64_t attention_ns = 0;    // norm, q/k/v, attention, output projection
  uint64_t predictor_ns = 0;    // predictor or active-set selection (incl. the dense gate if any)
  uint64_t ffn_ns = 0;          // the FFN proper (sparse or dense)
  uint64_t diagnostics_ns = 0;  // the dense gate/up computed only to measure recall/precision

  double active_fraction() const { return neurons ? static_cast<double>(active) / static_cast<double>(neurons) : 0.0; }
  double true_active_fraction() const {
    return neurons ? static_cast<double>(truly_active) / static_cast<double>(neurons) : 0.0;
  }
  // Share of the truly active neurons that were computed (1 when none was active).
  double recall() const {
    return truly_active ? static_cast<double>(true_positive) / static_cast<double>(truly_active) : 1.0;
  }
  // Share of the computed neurons that were truly active (1 when none was computed).
  double precision() const { return active ? static_cast<double>(true_positive) / static_cast<double>(active) : 1.0; }

  SparseLayerStats& operator+=(const SparseLayerStats& o) {
    tokens += o.tokens;
    neurons += o.neurons;
    active += o.active;
    truly_active += o.truly_active;
    true_positive += o.true_positive;
    attention_ns += o.attention_ns;
    predictor_ns += o.predictor_ns;
    ffn_ns += o.ffn_ns;
    diagnostics_ns += o.diagnostics_ns;
    return *this;
  }
};

}  // namespace ember
