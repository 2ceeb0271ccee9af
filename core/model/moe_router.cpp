#include "core/model/moe_router.h"

#include <cmath>

namespace ember {

void route_token(const float* logits, int64_t n_expert, int64_t k, int32_t* chosen, float* weights) {
  // k passes of a maximum search: k and n_expert are small (2 of 8 in Mixtral), and nothing to allocate.
  for (int64_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int64_t e = 0; e < n_expert; ++e) {
      bool taken = false;
      for (int64_t i = 0; i < j; ++i) taken = taken || chosen[i] == e;
      // NaN logits never win a comparison: an expert is still chosen (the first one free).
      if (!taken && (best < 0 || logits[e] > logits[best])) best = static_cast<int32_t>(e);
    }
    chosen[j] = best;
  }
  const float top = logits[chosen[0]];
  float sum = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    weights[j] = std::exp(logits[chosen[j]] - top);
    sum += weights[j];
  }
  for (int64_t j = 0; j < k; ++j) weights[j] /= sum;
}

}  // namespace ember
