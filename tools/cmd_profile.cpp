// `ember profile`: runs a model over a calibration text and writes its activation profile
// (core/sparse/activation_profile.h): per neuron how often it fires, per layer the |act(gate)|
// percentiles that calibrate CATS thresholds, the locality of the active set and, for PowerInfer
// files, the predictor's recall and precision. The text is split into windows of the context
// size; each starts fresh with BOS and runs as prefill batches (the FFN is dense there).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/model/inference_context.h"
#include "core/model/profiler_setup.h"
#include "core/model/routing_stats.h"
#include "core/sparse/activation_profiler.h"
#include "tools/model_options.h"
#include "tools/progress.h"
#include "tools/read_text_file.h"
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

double mean_of(const ActivationProfile& p, double LayerActivationProfile::*field) {
  double sum = 0.0;
  for (const LayerActivationProfile& l : p.layers) sum += l.*field;
  return p.layers.empty() ? 0.0 : sum / static_cast<double>(p.layers.size());
}

nlohmann::json summary_json(const ActivationProfile& p, const std::string& out_path, double seconds) {
  nlohmann::json layers = nlohmann::json::array();
  double hot = 0.0;
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const LayerActivationProfile& lp = p.layers[l];
    const double h = p.hot_share(static_cast<int64_t>(l), 0.2);
    hot += h;
    nlohmann::json j = {{"layer", l},
                        {"active_fraction", lp.active_fraction},
                        {"hot20_share", h},
                        {"locality", lp.locality},
                        {"gate_magnitude_p50", lp.gate_magnitude[ActivationProfile::kPercentiles / 2]}};
    if (!std::isnan(lp.predictor_recall)) {
      j["predictor_recall"] = lp.predictor_recall;
      j["predictor_precision"] = lp.predictor_precision;
    }
    layers.push_back(j);
  }
  const double n = std::max<double>(1.0, static_cast<double>(p.layers.size()));
  nlohmann::json j = {{"profile", out_path},
                      {"activation", p.activation},
                      {"tokens", p.tokens},
                      {"seconds", seconds},
                      {"active_fraction", mean_of(p, &LayerActivationProfile::active_fraction)},
                      {"hot20_share", hot / n},
                      {"locality", mean_of(p, &LayerActivationProfile::locality)},
                      {"layers", layers}};
  if (!p.layers.empty() && !std::isnan(p.layers[0].predictor_recall)) {
    j["predictor_recall"] = mean_of(p, &LayerActivationProfile::predictor_recall);
    j["predictor_precision"] = mean_of(p, &LayerActivationProfile::predictor_precision);
  }
  return j;
}

void print_summary(const nlohmann::json& s) {
  std::fprintf(stderr, "ember profile: %llu tokens (%s) in %.1f s -> %s\n", s["tokens"].get<unsigned long long>(),
               s["activation"].get<std::string>().c_str(), s["seconds"].get<double>(), s["profile"].get<std::string>().c_str());
  const bool pred = s.contains("predictor_recall");
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

nlohmann::json routing_json(const RoutingStats& stats, const std::string& text_path, double seconds) {
  nlohmann::json layers = nlohmann::json::array();
  double max_load = 0.0, min_load = 1e9, repeat = 0.0, overlap = 0.0;
  for (size_t l = 0; l < stats.layers().size(); ++l) {
    const LayerRoutingStats& s = stats.layers()[l];
    layers.push_back({{"layer", l},
                      {"expert_slots", s.expert_slots},
                      {"max_load", s.max_load()},
                      {"min_load", s.min_load()},
                      {"top1_repeat", s.top1_repeat_rate()},
                      {"overlap", s.overlap_rate()}});
    max_load = std::max(max_load, s.max_load());
    min_load = std::min(min_load, s.min_load());
    repeat += s.top1_repeat_rate();
    overlap += s.overlap_rate();
  }
  const double n = std::max<double>(1.0, static_cast<double>(stats.layers().size()));
  return {{"kind", "routing"},
          {"text", text_path},
          {"tokens", stats.layers().empty() ? 0 : stats.layers()[0].tokens},
          {"seconds", seconds},
          {"max_load", max_load},
          {"min_load", min_load},
          {"top1_repeat", repeat / n},
          {"overlap", overlap / n},
          {"chance_top1_repeat", stats.chance_top1_repeat()},
          {"chance_overlap", stats.chance_overlap()},
          {"layers", layers}};
}

void print_routing(const nlohmann::json& j) {
  std::fprintf(stderr, "layer  max.load  min.load  top1.repeat  overlap   (load: share / uniform share)\n");
  for (const auto& l : j["layers"]) {
    std::fprintf(stderr, "%5d  %8.2f  %8.2f  %11.3f  %7.3f\n", l["layer"].get<int>(), l["max_load"].get<double>(),
                 l["min_load"].get<double>(), l["top1_repeat"].get<double>(), l["overlap"].get<double>());
  }
  std::fprintf(stderr, "all    %8.2f  %8.2f  %11.3f  %7.3f   (chance: repeat %.3f, overlap %.3f)\n",
               j["max_load"].get<double>(), j["min_load"].get<double>(), j["top1_repeat"].get<double>(),
               j["overlap"].get<double>(), j["chance_top1_repeat"].get<double>(), j["chance_overlap"].get<double>());
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

// A mixture of experts (dense experts): the routing statistics, written as JSON to out_path.
int profile_routing(const ProfileOptions& o, const Model& model, ThreadPool& pool, const std::vector<int32_t>& tokens,
                    std::chrono::steady_clock::time_point t0) {
  const ModelConfig& c = model.config();
  RoutingStats stats(c.n_layer, c.n_expert, c.n_expert_used);
  ContextOptions copts = o.model.context_options();
  copts.sparse = SparseOptions{};
  copts.moe_observer = &stats;
  InferenceContext ctx(model, pool, copts);
  run_windows(ctx, model.tokenizer(), tokens, copts.max_batch, [&] { stats.sequence_break(); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const nlohmann::json j = routing_json(stats, o.text_path, seconds);
  write_text_file(o.out_path, j.dump(2) + "\n", "routing profile");
  std::fprintf(stderr, "ember profile: %llu tokens, %lld experts (%lld used) in %.1f s -> %s\n",
               static_cast<unsigned long long>(stats.layers()[0].tokens), static_cast<long long>(c.n_expert),
               static_cast<long long>(c.n_expert_used), seconds, o.out_path.c_str());
  print_routing(j);
  if (o.json) std::printf("%s\n", j.dump().c_str());
  return 0;
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
  if (model->config().is_moe()) return profile_routing(o, *model, pool, tokens, t0);

  ContextOptions copts = o.model.context_options();
  copts.sparse = SparseOptions{};  // profiles describe the dense FFN
  ActivationProfiler profiler(profiler_setup_for(*model, copts.max_batch), pool.size());
  copts.ffn_observer = &profiler;
  InferenceContext ctx(*model, pool, copts);
  run_windows(ctx, tok, tokens, copts.max_batch, [&] { profiler.sequence_break(); });

  const ActivationProfile p = profiler.result();
  save_activation_profile(p, o.out_path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const nlohmann::json summary = summary_json(p, o.out_path, seconds);
  print_summary(summary);
  if (o.json) std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace

void register_profile(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ProfileOptions>();
  CLI::App* sub = app.add_subcommand(
      "profile", "Record which FFN neurons fire on a calibration text (for `ember pack` and --sparsity calibration); "
      "for a mixture of experts, how tokens are routed (expert load, consecutive-token repeats) as JSON");
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
