// `ember eval`: perplexity of a text under one model configuration (dense or a sparse FFN mode),
// and with --compare-dense its KL divergence and top-1 agreement against the dense model. The work
// is core/model/text_evaluation.h; this file reads the text, picks the tokens and prints.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model/text_evaluation.h"
#include "tools/model_options.h"
#include "tools/progress.h"
#include "tools/read_text_file.h"
#include "tools/subcommands.h"

namespace ember::cli {
namespace {

struct EvalOptions {
  ModelOptions model;
  std::string text_path;
  bool compare_dense = false;
  int64_t max_tokens = 0;  // 0: all
  int64_t skip_tokens = 0;
  bool json = false;
};

// NaN (no value) as JSON null rather than relying on the library's spelling of it.
nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// Where the layer thresholds of the configuration came from (null without thresholds).
nlohmann::json threshold_source(const EvalOptions& o, SparseOptions::Mode mode) {
  using Mode = SparseOptions::Mode;
  if (mode == Mode::Threshold) {
    if (!o.model.profile_path.empty()) return "profile";
    if (!std::isnan(o.model.sparse_threshold)) return "flag";
    return "per-token quantile";
  }
  if (mode == Mode::Predictor) return std::isnan(o.model.sparse_threshold) ? "model" : "flag";
  return nullptr;
}

std::vector<int32_t> text_tokens(const EvalOptions& o, const Tokenizer& tok) {
  const std::string text = read_text_file(o.text_path, "text file");
  if (text.empty()) throw std::runtime_error("text file '" + o.text_path + "' is empty");
  // No BOS here: the evaluator puts one at the start of every window itself.
  std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
  const size_t all = ids.size();
  const size_t skip = std::min(all, static_cast<size_t>(o.skip_tokens));
  ids.erase(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(skip));
  if (o.max_tokens > 0 && ids.size() > static_cast<size_t>(o.max_tokens)) ids.resize(static_cast<size_t>(o.max_tokens));
  if (ids.size() < 2) {
    throw std::runtime_error("text file '" + o.text_path + "' gives " + std::to_string(all) + " tokens" +
                             (o.skip_tokens > 0 ? ", " + std::to_string(ids.size()) + " after --skip-tokens" : "") +
                             "; evaluation needs at least 2");
  }
  return ids;
}

int eval(const EvalOptions& o) {
  ThreadPool pool(o.model.threads);
  auto model = Model::load(o.model.model_path, o.model.load_options(o.model.model_path));
  const std::vector<int32_t> tokens = text_tokens(o, model->tokenizer());
  TextEvaluator evaluator(*model, pool, o.model.context_options(*model), o.compare_dense);
  const InferenceContext& ctx = evaluator.context();
  const SparseOptions::Mode mode = ctx.sparse_options().mode;

  const auto t0 = std::chrono::steady_clock::now();
  TextEvalResult r;
  {
    ProgressBar bar("eval", evaluator.scored_positions(tokens.size()));
    r = evaluator.evaluate(tokens, [&bar](uint64_t done, uint64_t) { bar.update(done); });
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  nlohmann::json thresholds = nullptr;
  if (mode == SparseOptions::Mode::Threshold || mode == SparseOptions::Mode::Predictor) {
    thresholds = nlohmann::json::array();
    for (int64_t l = 0; l < model->config().n_layer; ++l) thresholds.push_back(number_or_null(ctx.sparse_threshold(l)));
  }
  const nlohmann::json j = {
      {"model", o.model.model_path},
      {"text", o.text_path},
      {"tokens", r.tokens},
      {"text_tokens", tokens.size()},
      {"skip_tokens", o.skip_tokens},
      {"windows", r.windows},
      {"window_tokens", evaluator.window_tokens()},
      {"mode", sparse_mode_name(mode)},
      {"target_sparsity", o.model.sparsity >= 0.0 ? nlohmann::json(o.model.sparsity) : nlohmann::json(nullptr)},
      {"threshold_source", threshold_source(o, mode)},
      {"layer_thresholds", thresholds},
      {"perplexity", r.perplexity},
      {"mean_nll", r.mean_nll},
      {"kl_mean", number_or_null(r.kl_mean)},
      {"top1_agreement", number_or_null(r.top1_agreement)},
      {"ffn_active_fraction", r.ffn_active_fraction},
      {"layer_active_fraction", r.layer_active_fraction},
      {"threads", pool.size()},
      {"elapsed_s", elapsed},
  };
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%llu tokens scored (%llu windows of up to %lld) in %.1f s\n", (unsigned long long)r.tokens,
              (unsigned long long)r.windows, (long long)evaluator.window_tokens(), elapsed);
  std::printf("perplexity %.4f (mean NLL %.4f nats)\n", r.perplexity, r.mean_nll);
  std::printf("FFN (%s", sparse_mode_name(mode));
  if (o.model.sparsity >= 0.0) std::printf(", target sparsity %.2f", o.model.sparsity);
  if (!j["threshold_source"].is_null()) std::printf(", thresholds: %s", j["threshold_source"].get<std::string>().c_str());
  std::printf("): active fraction %.4f\n", r.ffn_active_fraction);
  std::printf("per-layer active fraction:");
  for (double f : r.layer_active_fraction) std::printf(" %.3f", f);
  std::printf("\n");
  if (o.compare_dense) {
    std::printf("against dense: KL %.5f nats per token, top-1 agreement %.4f\n", r.kl_mean, r.top1_agreement);
  }
  return 0;
}

}  // namespace

void register_eval(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* sub = app.add_subcommand(
      "eval", "Perplexity of a text, teacher-forced one token at a time (decode steps, so sparse modes apply); "
              "--compare-dense adds KL divergence and top-1 agreement against the dense model");
  o->model.add_to(*sub);
  o->model.add_sparse_to(*sub);
  // No CLI::ExistingFile check: a missing file is reported like every other runtime error (exit 1).
  sub->add_option("-f,--file", o->text_path, "Text file to evaluate (the whole file is tokenized, no BOS)")->required();
  sub->add_flag("--compare-dense", o->compare_dense,
                "Also run the dense model over the same windows: mean KL(dense || this) and top-1 agreement");
  sub->add_option("--max-tokens", o->max_tokens, "Evaluate at most this many tokens of the text (default: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  sub->add_option("--skip-tokens", o->skip_tokens, "Skip this many tokens at the start of the text first (default 0)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  sub->add_flag("--json", o->json, "Print one JSON object on stdout instead of the human summary");
  sub->callback([o, &exit_code] { exit_code = eval(*o); });
}

}  // namespace ember::cli
