#pragma once
// The FFN activations Ember runs, and the per-neuron arithmetic shared by the dense FFN
// (core/model/ops) and the sparse one (core/sparse/sparse_ffn), so both compute the same floats.
#include <cmath>
#include <cstdint>

namespace ember {

enum class FfnActivation {
  SiLU,   // SwiGLU: down(silu(gate x) * up x)           llama, mistral
  ReLU,   // ReGLU:  down(relu(gate x) * up x)           ReluLLaMA, ProSparse
  DReLU,  // dReLU:  down(relu(gate x) * relu(up x))     TurboSparse, Bamboo
};
const char* activation_name(FfnActivation a);

// True for the activations that output exactly 0 for most neurons (ReLU, dReLU).
inline bool is_relu_family(FfnActivation a) { return a != FfnActivation::SiLU; }

// The gate's own non-linearity: silu(g) or relu(g). Its magnitude is what the threshold mode
// (CATS) compares against a per-layer threshold.
inline float gate_activation(FfnActivation a, float g) {
  if (a == FfnActivation::SiLU) return g / (1.0f + std::exp(-g));
  return g > 0.0f ? g : 0.0f;
}

// One neuron's activation h = act(gate) * up (dReLU: relu(gate) * relu(up)). The expressions are
// those of ops.cpp's ffn_activation, term for term, so sparse and dense results agree bit for bit
// for the same gate and up values.
inline float neuron_activation(FfnActivation a, float g, float u) {
  switch (a) {
    case FfnActivation::SiLU: return (g / (1.0f + std::exp(-g))) * u;
    case FfnActivation::ReLU: return (g > 0.0f ? g : 0.0f) * u;
    case FfnActivation::DReLU: return (g > 0.0f ? g : 0.0f) * (u > 0.0f ? u : 0.0f);
  }
  return 0.0f;
}

// h[i] = act(gate[i]) * up[i] (dReLU: relu(gate[i]) * relu(up[i])) for a row of n neurons, written
// over gate: the dense FFN's activation (in RAM and streamed from storage alike).
void ffn_activation(float* gate, const float* up, int64_t n, FfnActivation act);

}  // namespace ember
