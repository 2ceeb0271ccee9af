#include "tools/sparse_report.h"

namespace ember::cli {
namespace {

// Milliseconds per decoded token: the counters sum over layers, and every layer sees each token.
double ms_per_token(uint64_t ns, const SparseLayerStats& totals, int64_t n_layer) {
  const uint64_t tokens = n_layer > 0 ? totals.tokens / static_cast<uint64_t>(n_layer) : 0;
  return tokens ? static_cast<double>(ns) / 1e6 / static_cast<double>(tokens) : 0.0;
}

}  // namespace

bool has_sparse_report(const InferenceContext& ctx) { return ctx.sparse_totals().tokens > 0; }

nlohmann::json sparse_report_json(const InferenceContext& ctx) {
  const SparseLayerStats t = ctx.sparse_totals();
  const int64_t n_layer = ctx.model().config().n_layer;
  const bool diag = ctx.sparse_options().diagnostics;
  nlohmann::json j = {
      {"mode", sparse_mode_name(ctx.sparse_options().mode)},
      {"ffn_active_fraction", t.active_fraction()},
      {"attention_ms_per_token", ms_per_token(t.attention_ns, t, n_layer)},
      {"predictor_ms_per_token", ms_per_token(t.predictor_ns, t, n_layer)},
      {"ffn_ms_per_token", ms_per_token(t.ffn_ns, t, n_layer)},
  };
  if (diag) {
    j["true_active_fraction"] = t.true_active_fraction();
    j["recall"] = t.recall();
    j["precision"] = t.precision();
  }
  return j;
}

void print_sparse_report(const InferenceContext& ctx, std::FILE* out) {
  const nlohmann::json j = sparse_report_json(ctx);
  std::fprintf(out, "ember: sparse FFN (%s): active %.3f", j["mode"].get<std::string>().c_str(),
               j["ffn_active_fraction"].get<double>());
  if (j.contains("recall")) {
    std::fprintf(out, ", truly active %.3f, recall %.3f, precision %.3f", j["true_active_fraction"].get<double>(),
                 j["recall"].get<double>(), j["precision"].get<double>());
  }
  std::fprintf(out, "; per token: attention %.2f ms, predictor %.2f ms, FFN %.2f ms\n",
               j["attention_ms_per_token"].get<double>(), j["predictor_ms_per_token"].get<double>(),
               j["ffn_ms_per_token"].get<double>());
}

}  // namespace ember::cli
