#include "core/sparse/moe_activation_profile.h"

#include <stdexcept>
#include <string>

namespace ember {

ActivationProfile moe_activation_profile(const ActivationProfiler& profiler, int64_t n_expert, uint64_t tokens) {
  ActivationProfile p = profiler.result();
  const auto n_units = static_cast<int64_t>(p.layers.size());
  if (n_expert <= 0 || n_units % n_expert != 0) {
    throw std::invalid_argument("MoE profile: " + std::to_string(n_units) + " profiled units are not layers of " +
                                std::to_string(n_expert) + " experts");
  }
  p.n_expert = n_expert;
  p.tokens = tokens;
  for (int64_t u = 0; u < n_units; ++u) {
    const uint64_t routed = profiler.tokens(u);
    if (routed > tokens) {
      throw std::invalid_argument("MoE profile: unit " + std::to_string(u) + " saw " + std::to_string(routed) +
                                  " tokens of " + std::to_string(tokens));
    }
    const double share = tokens > 0 ? static_cast<double>(routed) / static_cast<double>(tokens) : 0.0;
    for (float& f : p.layers[static_cast<size_t>(u)].frequency) f = static_cast<float>(static_cast<double>(f) * share);
  }
  return p;
}

}  // namespace ember
