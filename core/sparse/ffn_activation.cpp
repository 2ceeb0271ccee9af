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

}  // namespace ember
