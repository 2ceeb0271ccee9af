// `ember profile`: runs a model over a calibration text and writes its activation profile
// (core/sparse/activation_profile.h): per neuron how often it fires, per layer the |act(gate)|
// percentiles that calibrate CATS thresholds, the locality of the active set and, for PowerInfer
// files, the predictor's recall and precision. The text is split into windows of the context
// size; each starts fresh with BOS and runs as prefill batches (the FFN is dense there). A mixture
// of experts is profiled per (layer, expert) unit (joint frequencies, activation_profile.h), and
// its routing statistics are printed too.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/model/inference_context.h"
#include "core/model/profiler_setup.h"
#include "core/model/routing_stats.h"
#include "core/sparse/activation_profiler.h"
#include "core/sparse/moe_activation_profile.h"
#include "tools/model_options.h"
#include "tools/progress.h"
#include "tools/read_text_file.h"
#include "tools/routing_summary.h"
#include "tools/subcommands.h"

namespace ember::cli {
namespace {

struct ProfileOptions {
  ModelOptions model;
  std::string text_path;
  std::string out_path;
  int64_t max_tokens = 0;  // 0: the whole text
  bool json = false;
};

constexpr const char* kFigures[] = {"active_fraction", "hot20_share", "locality", "gate_magnitude_p50",
                                    "predictor_recall", "predictor_precision"};

// A row of the summary: a dense layer or a mixture-of-experts unit.
nlohmann::json row_json(const ActivationProfile& p, int64_t layer) {
  const LayerActivationProfile& lp = p.layers[static_cast<size_t>(layer)];
  nlohmann::json j = {{"layer", layer},
                      {"active_fraction", lp.active_fraction},
                      {"hot20_share", p.hot_share(layer, 0.2)},
                      {"locality", lp.locality},
                      {"gate_magnitude_p50", lp.gate_magnitude[ActivationProfile::kPercentiles / 2]}};
  if (!std::isnan(lp.predictor_recall)) {
    j["predictor_recall"] = lp.predictor_recall;
    j["predictor_precision"] = lp.predictor_precision;
  }
  return j;
}

// Adds weight x each of row's figures to out's.
void add_weighted(nlohmann::json& out, const nlohmann::json& row, double weight) {
  for (const char* key : kFigures) {
    if (row.contains(key)) out[key] = out.value(key, 0.0) + weight * row[key].get<double>();
  }
}

// A mixture-of-experts layer: its units' conditional figures averaged with their routed tokens as
// weights (i.e. per routed (token, expert) pair), and the hot share over all of its experts'
// neurons together, by joint frequency (what a neuron cache shared by the experts holds). Appends
// the layer's units to `units`.
nlohmann::json moe_layer_json(const ActivationProfile& p, int64_t layer, const LayerRoutingStats& routes,
                              nlohmann::json& units) {
  nlohmann::json j = {{"layer", layer}};
  uint64_t slots = 0;
  for (uint64_t n : routes.expert_slots) slots += n;
  std::vector<float> joint;
  for (int64_t e = 0; e < p.n_expert; ++e) {
    const int64_t u = layer * p.n_expert + e;
    const uint64_t routed = routes.expert_slots[static_cast<size_t>(e)];
    nlohmann::json unit = row_json(p, u);
    unit["unit"] = u;
    unit["layer"] = layer;
    unit["expert"] = e;
    unit["routed"] = routes.tokens ? static_cast<double>(routed) / static_cast<double>(routes.tokens) : 0.0;
    add_weighted(j, unit, slots ? static_cast<double>(routed) / static_cast<double>(slots) : 0.0);
    units.push_back(unit);
    const std::vector<float>& f = p.layers[static_cast<size_t>(u)].frequency;
    joint.insert(joint.end(), f.begin(), f.end());
  }
  j["hot20_share"] = hot_share(joint, 0.2);
  return j;
}

// `routes`: a mixture of experts' routing; its rows are then the model's layers, its units listed
// under "units".
nlohmann::json summary_json(const ActivationProfile& p, const RoutingStats* routes, const std::string& out_path,
                            double seconds) {
  nlohmann::json layers = nlohmann::json::array(), units = nlohmann::json::array();
  if (routes == nullptr) {
    for (size_t l = 0; l < p.layers.size(); ++l) layers.push_back(row_json(p, static_cast<int64_t>(l)));
  } else {
    for (size_t l = 0; l < routes->layers().size(); ++l) {
      layers.push_back(moe_layer_json(p, static_cast<int64_t>(l), routes->layers()[l], units));
    }
  }
  nlohmann::json j = {{"profile", out_path}, {"activation", p.activation}, {"tokens", p.tokens},
                      {"seconds", seconds}, {"layers", layers}};
  for (const nlohmann::json& row : layers) add_weighted(j, row, 1.0 / static_cast<double>(layers.size()));
  if (routes != nullptr) {
    j["n_expert"] = p.n_expert;
    j["units"] = units;
  }
  return j;
}

void print_summary(const nlohmann::json& s) {
  std::fprintf(stderr, "ember profile: %llu tokens (%s) in %.1f s -> %s\n", s["tokens"].get<unsigned long long>(),
               s["activation"].get<std::string>().c_str(), s["seconds"].get<double>(), s["profile"].get<std::string>().c_str());
  const bool pred = s.contains("predictor_recall");
  if (s.contains("n_expert")) {
    std::fprintf(stderr, "mixture of %d experts: per layer over the routed (token, expert) pairs, hot20%% over all "
                 "experts' neurons; per expert in --json\n", s["n_expert"].get<int>());
  }
  std::fprintf(stderr, "layer  active  hot20%%share  locality  |act|p50%s\n", pred ? "  pred.recall  pred.precision" : "");
  for (const auto& l : s["layers"]) {
    std::fprintf(stderr, "%5d  %6.3f  %11.3f  %8.3f  %8.4f", l["layer"].get<int>(), l["active_fraction"].get<double>(),
                 l["hot20_share"].get<double>(), l["locality"].get<double>(), l["gate_magnitude_p50"].get<double>());
    if (pred) std::fprintf(stderr, "  %11.4f  %14.4f", l["predictor_recall"].get<double>(), l["predictor_precision"].get<double>());
    std::fputc('\n', stderr);
  }
  std::fprintf(stderr, "mean   %6.3f  %11.3f  %8.3f", s["active_fraction"].get<double>(), s["hot20_share"].get<double>(),
               s["locality"].get<double>());
  if (pred) std::fprintf(stderr, "            %11.4f  %14.4f", s["predictor_recall"].get<double>(), s["predictor_precision"].get<double>());
  std::fputc('\n', stderr);
}

// Runs the text through ctx in windows of the context size, each BOS + the next tokens, evaluated
// a batch at a time; new_sequence() runs before each window.
void run_windows(InferenceContext& ctx, const Tokenizer& tok, const std::vector<int32_t>& tokens, int64_t max_batch,
                 const std::function<void()>& new_sequence) {
  const bool bos = tok.bos_id() >= 0;
  const auto window = static_cast<size_t>(ctx.n_ctx() - (bos ? 1 : 0));
  if (window == 0) throw std::runtime_error("the context is too small to profile (raise --ctx-size)");
  ProgressBar bar("profile", tokens.size());
  std::vector<int32_t> chunk;
  chunk.reserve(window + 1);
  for (size_t start = 0; start < tokens.size(); start += window) {
    const size_t end = std::min(tokens.size(), start + window);
    chunk.clear();
    if (bos) chunk.push_back(tok.bos_id());
    chunk.insert(chunk.end(), tokens.begin() + static_cast<std::ptrdiff_t>(start), tokens.begin() + static_cast<std::ptrdiff_t>(end));
    ctx.reset();
    new_sequence();
    const auto batch = static_cast<size_t>(max_batch);
    for (size_t b = 0; b < chunk.size(); b += batch) {
      const size_t n = std::min(batch, chunk.size() - b);
      ctx.eval(std::span<const int32_t>(chunk.data() + b, n));
      bar.update(std::min(end, start + b + n));
    }
  }
  bar.finish();
}

int profile(const ProfileOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string text = read_text_file(o.text_path, "calibration text");
  ThreadPool pool(o.model.threads);
  auto model = Model::load(o.model.model_path, o.model.load_options(o.model.model_path));
  const Tokenizer& tok = model->tokenizer();
  std::vector<int32_t> tokens = tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
  if (o.max_tokens > 0 && static_cast<int64_t>(tokens.size()) > o.max_tokens) tokens.resize(static_cast<size_t>(o.max_tokens));
  if (tokens.empty()) throw std::runtime_error("the calibration text '" + o.text_path + "' holds no tokens");

  const ModelConfig& c = model->config();
  ContextOptions copts = o.model.context_options();
  copts.sparse = SparseOptions{};  // profiles describe the dense FFN
  ActivationProfiler profiler(profiler_setup_for(*model, copts.max_batch), pool.size());
  copts.ffn_observer = &profiler;
  std::optional<RoutingStats> routes;  // a mixture of experts: both observers in one pass
  if (c.is_moe()) copts.moe_observer = &routes.emplace(c.n_layer, c.n_expert, c.n_expert_used);
  InferenceContext ctx(*model, pool, copts);
  run_windows(ctx, tok, tokens, copts.max_batch, [&] {
    profiler.sequence_break();
    if (routes) routes->sequence_break();
  });

  const ActivationProfile p =
      routes ? moe_activation_profile(profiler, c.n_expert, routes->layers()[0].tokens) : profiler.result();
  save_activation_profile(p, o.out_path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json summary = summary_json(p, routes ? &*routes : nullptr, o.out_path, seconds);
  print_summary(summary);
  if (routes) {
    summary["routing"] = routing_json(*routes, o.text_path, seconds);
    std::fprintf(stderr, "routing: %lld experts, %lld used per token\n", static_cast<long long>(c.n_expert),
                 static_cast<long long>(c.n_expert_used));
    print_routing(summary["routing"]);
  }
  if (o.json) std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace

void register_profile(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ProfileOptions>();
  CLI::App* sub = app.add_subcommand(
      "profile", "Record which FFN neurons fire on a calibration text (for `ember pack` and --sparsity calibration); "
      "per (layer, expert) for a mixture of experts, with how its tokens are routed");
  opts->model.add_to(*sub);
  sub->get_option("-m")->required();
  sub->add_option("-f,--file", opts->text_path, "Calibration text (UTF-8)")->required()->check(CLI::ExistingFile);
  sub->add_option("-o,--output", opts->out_path, "Profile file to write")->required();
  sub->add_option("--max-tokens", opts->max_tokens, "Profile at most this many tokens of the text (default: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  sub->add_flag("--json", opts->json, "Also print the summary as one JSON object on stdout");
  sub->callback([opts, &exit_code] { exit_code = profile(*opts); });
}

}  // namespace ember::cli
