#pragma once
// The activation profile of a mixture of experts (activation_profile.h, "units") from an
// ActivationProfiler whose layers were its (layer, expert) units, each fed the tokens routed to it.
#include <cstdint>

#include "core/sparse/activation_profile.h"
#include "core/sparse/activation_profiler.h"

namespace ember {

// The profiler's per-unit frequencies are among the unit's own tokens; they become joint ones (of
// all `tokens` profiled) here. Everything else stays conditional on the routing. Throws
// std::invalid_argument when the profiler's layers are not n_layer * n_expert units or a unit saw
// more tokens than `tokens`.
ActivationProfile moe_activation_profile(const ActivationProfiler& profiler, int64_t n_expert, uint64_t tokens);

}  // namespace ember
