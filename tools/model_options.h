#pragma once
// Flags shared by the subcommands that load a model (run, bench, ...), so each is spelled and
// described once.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>

#include "core/model/inference_context.h"
#include "core/model/model.h"

namespace ember::cli {

struct ModelOptions {
  std::string model_path;
  int threads = 0;        // 0: one per physical core
  int64_t ctx_size = 0;   // 0: model's training context, capped at 4096
  int64_t batch = 512;
  bool no_mmap = false;
  bool no_repack = false;
  // Memory budget: --memory-budget SIZE|P% (packs only) and --io-backend auto|uring|pread.
  std::string memory_budget;
  std::string io_backend = "auto";
  bool no_prefetch = false;     // --no-prefetch: OffloadOptions::prefetch off
  bool force_prefetch = false;  // --prefetch: on (neither: the pack's default)

  // Sparse FFN for decode steps (core/sparse): --sparse MODE, --sparse-threshold, --sparsity.
  std::string sparse_mode = "dense";
  double sparse_threshold = std::numeric_limits<double>::quiet_NaN();
  double sparsity = -1.0;  // < 0: not given
  bool sparse_stats = false;
  std::string profile_path;  // --profile: CATS thresholds per layer for --sparsity, from `ember profile`

  bool demo_if_missing = false;  // set before add_to(): -m becomes optional

  void add_to(CLI::App& sub);
  // The sparse-FFN flags (run, bench); context_options() applies them.
  void add_sparse_to(CLI::App& sub);
  // --memory-budget, --io-backend, --prefetch and --no-prefetch (run, bench, serve).
  void add_memory_to(CLI::App& sub);
  // model_path, or the built-in demo model (created on first use) when none was given.
  std::string resolve_model_path() const;
  // For the model file at `path` (a --memory-budget percentage is of its size). Throws
  // CLI::ValidationError naming the flag for a bad budget or backend.
  ModelLoadOptions load_options(const std::string& path) const;
  // Throws CLI::ValidationError for a sparse mode name it does not know or conflicting flags, and
  // when --profile is given (it needs the model: use the overload below).
  ContextOptions context_options() const;
  // The same, with --profile applied: per-layer thresholds for --sparsity from the profile, after
  // checking that it was made for this model's shape.
  ContextOptions context_options(const Model& model) const;

 private:
  ContextOptions context_options_unchecked() const;  // every flag but --profile applied
};

}  // namespace ember::cli
