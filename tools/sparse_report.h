#pragma once
// What `ember run` and `ember bench` say about the sparse FFN after decoding: active fraction,
// predictor recall/precision (with --sparse-stats) and where each token's time went.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/model/inference_context.h"

namespace ember::cli {

// True when the context collected sparse counters (a sparse mode, or --sparse-stats).
bool has_sparse_report(const InferenceContext& ctx);
// One line on `out`.
void print_sparse_report(const InferenceContext& ctx, std::FILE* out);
// The same as JSON: mode, ffn_active_fraction, true_active_fraction, recall, precision, and
// ms per decoded token for attention, predictor and FFN.
nlohmann::json sparse_report_json(const InferenceContext& ctx);

}  // namespace ember::cli
