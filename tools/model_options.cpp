#include "tools/model_options.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "core/cache/budget_planner.h"

#include "core/sparse/activation_profile.h"
#include "core/sparse/sparse_settings.h"
#include "core/synth/demo_model.h"

namespace ember::cli {

void ModelOptions::add_to(CLI::App& sub) {
  auto* m = sub.add_option("-m,--model", model_path,
                           demo_if_missing ? "Model file (GGUF); default: the built-in demo model (synthetic)"
                                           : "Model file (GGUF)");
  m->check(CLI::ExistingFile);
  if (!demo_if_missing) m->required();
  sub.add_option("-t,--threads", threads, "Worker threads (default: one per physical core)")
      ->check(CLI::Range(0, 1024));
  sub.add_option("-c,--ctx-size", ctx_size,
                 "Context window in tokens (default: the model's training context, at most 4096)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  sub.add_option("-b,--batch-size", batch, "Prompt tokens evaluated per forward step (default 512)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  sub.add_flag("--no-mmap", no_mmap, "Read the weights into memory instead of mapping the file");
  sub.add_flag("--no-repack", no_repack,
               "Do not keep interleaved copies of Q4_0 matrices (saves their size in memory, slower matmuls)");
}

void ModelOptions::add_sparse_to(CLI::App& sub) {
  sub.add_option("--sparse", sparse_mode,
                 "FFN of decode steps: dense (default), oracle (ReLU-family models: exact active set, for "
                 "checking), predictor (PowerInfer predictor tensors), threshold (training-free, see --sparsity)")
      ->check(CLI::IsMember({"dense", "oracle", "predictor", "threshold"}));
  sub.add_option("--sparse-threshold", sparse_threshold,
                 "predictor: replaces the file's powerinfer.sparse_threshold; threshold: |act(gate)| cut-off "
                 "of every layer");
  sub.add_option("--sparsity", sparsity,
                 "Threshold mode skipping this fraction of FFN neurons per token (smallest |act(gate)|), "
                 "e.g. 0.5; implies --sparse threshold")
      ->check(CLI::Range(0.0, 0.99));
  sub.add_flag("--sparse-stats", sparse_stats,
               "Also compute the dense FFN to report the true active fraction and the predictor's recall and "
               "precision (slower; for measurement)");
  sub.add_option("--profile", profile_path,
                 "With --sparsity: per-layer |act(gate)| thresholds calibrated on the profile's text (from `ember "
                 "profile`) instead of the per-token quantile")
      ->check(CLI::ExistingFile);
}

void ModelOptions::add_memory_to(CLI::App& sub) {
  sub.add_option("--memory-budget", memory_budget,
                 "Cap on resident model bytes for a neuron-bundle pack (`ember pack`): e.g. 2G, 512M, 50% (of "
                 "the file). FFN bundles beyond it stay on storage and are read on demand into the neuron cache");
  sub.add_option("--io-backend", io_backend, "How cold bundles are read under --memory-budget: auto (io_uring, "
                                             "else a pread pool), uring, pread (default auto)")
      ->check(CLI::IsMember({"auto", "uring", "io_uring", "pread"}));
  CLI::Option* off = sub.add_flag("--no-prefetch", no_prefetch,
                                  "Under --memory-budget: do not start reading each layer's predicted bundles before "
                                  "its attention (saves one predictor evaluation per layer and the reads of "
                                  "mispredicted bundles)");
  sub.add_flag("--prefetch", force_prefetch,
               "Under --memory-budget: do read each layer's predicted bundles before its attention (default: on for "
               "dense packs, off for mixtures of experts)")
      ->excludes(off);
}

std::string ModelOptions::resolve_model_path() const {
  if (!model_path.empty()) return model_path;
  bool created = false;
  std::string path = synth::ensure_demo_model(&created);
  std::fprintf(stderr, "ember: no model given (-m); %s the built-in demo model %s (synthetic weights, not a real language model)\n",
               created ? "created" : "using", path.c_str());
  return path;
}

ModelLoadOptions ModelOptions::load_options(const std::string& path) const {
  ModelLoadOptions o;
  o.load = no_mmap ? WeightLoad::Read : WeightLoad::Mmap;
  o.repack = !no_repack;
  if (!io::parse_io_backend(io_backend, &o.offload.backend)) {
    throw CLI::ValidationError("--io-backend", "unknown backend '" + io_backend + "' (auto, uring, pread)");
  }
  if (no_prefetch) o.offload.prefetch = false;
  if (force_prefetch) o.offload.prefetch = true;
  if (!memory_budget.empty()) {
    std::error_code ec;
    const auto file_bytes = std::filesystem::file_size(path, ec);
    try {
      o.offload.budget_bytes = cache::parse_memory_budget(memory_budget, ec ? 0 : static_cast<uint64_t>(file_bytes));
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("--memory-budget", e.what());
    }
    // Under a budget the weights are mapped (a repacked matrix gives its mapped pages back, see
    // ModelWeights): reading them into memory would hold both copies.
    o.load = WeightLoad::Mmap;
  }
  return o;
}

ContextOptions ModelOptions::context_options() const {
  if (!profile_path.empty()) throw std::logic_error("--profile needs the model: call context_options(model)");
  return context_options_unchecked();
}

ContextOptions ModelOptions::context_options(const Model& model) const {
  ContextOptions o = context_options_unchecked();
  if (profile_path.empty()) return o;
  const ActivationProfile profile = load_activation_profile(profile_path);
  check_profile_matches(profile, model.config().n_layer, model.config().n_ff, model.config().n_expert);
  o.sparse.layer_thresholds = profile.thresholds_for_sparsity(sparsity);
  return o;
}

ContextOptions ModelOptions::context_options_unchecked() const {
  ContextOptions o;
  o.n_ctx = ctx_size;
  o.max_batch = batch;
  // The rules live in core/sparse/sparse_settings so `ember serve` applies the same ones.
  SparseSettings settings;
  settings.mode = sparse_mode;
  settings.threshold = sparse_threshold;
  settings.sparsity = sparsity;
  settings.diagnostics = sparse_stats;
  settings.profile = !profile_path.empty();
  try {
    o.sparse = resolve_sparse_settings(settings, {"--sparse", "--sparse-threshold", "--sparsity", "--profile"});
  } catch (const SparseSettingsError& e) {
    throw CLI::ValidationError(e.setting, e.what());
  }
  return o;
}

}  // namespace ember::cli
