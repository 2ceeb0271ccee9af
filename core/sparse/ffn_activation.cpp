#include "core/sparse/ffn_activation.h"

namespace ember {

const char* activation_name(FfnActivation a) {
  switch (a) {
    case FfnActivation::SiLU: return "silu";
    case FfnActivation::ReLU: return "relu";
    case FfnActivation::DReLU: return "drelu";
  }
  return "?";
}

void ffn_activation(float* gate, const float* up, int64_t n, FfnActivation act) {
  switch (act) {
    case FfnActivation::SiLU:
      for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        gate[i] = (g / (1.0f + std::exp(-g))) * up[i];
      }
      break;
    case FfnActivation::ReLU:
      for (int64_t i = 0; i < n; ++i) gate[i] = (gate[i] > 0.0f ? gate[i] : 0.0f) * up[i];
      break;
    case FfnActivation::DReLU:
      for (int64_t i = 0; i < n; ++i) {
        gate[i] = (gate[i] > 0.0f ? gate[i] : 0.0f) * (up[i] > 0.0f ? up[i] : 0.0f);
      }
      break;
  }
}

}  // namespace ember
