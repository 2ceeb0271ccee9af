#pragma once
// The ActivationProfiler's sizes, activation and predictor tensors, read from a loaded model.
// Here rather than in core/sparse because core/sparse does not know the Model.
#include <cstdint>

#include "core/model/model.h"
#include "core/sparse/activation_profiler.h"

namespace ember {

// `max_tokens`: the most tokens one observation holds, i.e. the context's max_batch. The
// predictor's fc1/fc2 and threshold are set only when the model has a predictor. A mixture of
// experts gets one profiler layer per (layer, expert) unit, with that expert's predictor.
ProfilerSetup profiler_setup_for(const Model& model, int64_t max_tokens);

}  // namespace ember
