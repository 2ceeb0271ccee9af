#pragma once
// Choosing which FFN neurons a decode step computes. Every function writes the chosen neuron ids in
// ascending order into `out` (room for n ids) and returns how many it wrote; none allocates.
#include <cstdint>

#include "core/sparse/ffn_activation.h"

namespace ember {

// Predictor: ids i with scores[i] > threshold.
int64_t select_above(const float* scores, int64_t n, float threshold, int32_t* out);

// Oracle for ReLU-family activations: the ids whose activation can be non-zero, gate[i] > 0 (and,
// for dReLU, up[i] > 0; `up` may be null for ReLU). A neuron left out has activation exactly 0.
int64_t select_relu_active(const float* gate, const float* up, int64_t n, FfnActivation act, int32_t* out);

// Threshold (CATS): ids with |gate_activation(gate[i])| >= threshold. threshold <= 0 keeps all
// (ReLU family: all with gate > 0, the rest are exactly 0).
int64_t select_by_gate_magnitude(const float* gate, int64_t n, FfnActivation act, float threshold, int32_t* out);

// The threshold below which `skip_fraction` of the n neurons' |gate_activation(gate)| lie (the
// per-token quantile), for select_by_gate_magnitude. scratch: n floats. skip_fraction <= 0 gives 0.
float gate_magnitude_quantile(const float* gate, int64_t n, FfnActivation act, float skip_fraction, float* scratch);

// How many of the ids are in the true active set, i.e. have h[id] != 0.
int64_t count_nonzero_at(const float* h, const int32_t* ids, int64_t n_ids);
// How many of h[0..n) are non-zero.
int64_t count_nonzero(const float* h, int64_t n);

}  // namespace ember
