#include "tools/serve_models.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "core/cache/budget_planner.h"
#include "core/gguf/gguf_file.h"
#include "core/kernels/type_traits.h"
#include "core/model/model_config.h"
#include "core/sparse/sparse_settings.h"
#include "server/memory_pressure.h"

namespace ember::cli {

ModelOptions serve_model_options(const server::ServeConfig& config) {
  ModelOptions model;
  model.model_path = config.model_path;
  model.threads = config.threads;
  model.ctx_size = config.ctx_size;
  model.batch = config.batch;
  model.no_mmap = !config.mmap;
  model.no_repack = !config.repack;
  // The sparse section through ModelOptions, so the profile is applied exactly as `ember run`
  // does (check_config already refused conflicting settings, with the config's key names).
  const SparseSettings sparse = server::sparse_settings(config);
  model.sparse_mode = sparse.mode;
  model.sparse_threshold = sparse.threshold;
  model.sparsity = sparse.sparsity;
  model.sparse_stats = sparse.diagnostics;
  model.profile_path = config.sparse_profile;
  model.memory_budget = config.memory_budget;
  model.io_backend = config.io_backend;
  model.no_prefetch = config.prefetch == false;
  model.force_prefetch = config.prefetch == true;
  return model;
}

namespace {

ModelOptions entry_options(const server::ServeConfig& config, const server::ModelEntry& entry) {
  ModelOptions model = serve_model_options(config);
  model.model_path = entry.path;
  if (entry.overrides.ctx_size >= 0) model.ctx_size = entry.overrides.ctx_size;
  if (!entry.overrides.memory_budget.empty()) model.memory_budget = entry.overrides.memory_budget;
  return model;
}

}  // namespace

std::unique_ptr<server::ServedModel> load_served_model(const server::ServeConfig& config,
                                                       const server::ModelEntry& entry,
                                                       const LoadCheckpoint& checkpoint, const ServeLog& log) {
  const ModelOptions model = entry_options(config, entry);
  std::unique_ptr<Model> loaded;
  try {
    ModelLoadOptions load_options = model.load_options(entry.path);
    load_options.checkpoint = checkpoint;
    loaded = Model::load(entry.path, load_options);
  } catch (const LoadCancelled&) {
    throw;
  } catch (const std::exception& e) {
    // Under a budget the load also plans it and opens the pack for reads: say which setting the
    // failure belongs to (not a pack, a budget below the minimum, io_uring refused).
    if (model.memory_budget.empty()) throw;
    const std::string key = entry.overrides.memory_budget.empty()
                                ? std::string("memory.budget")
                                : "models.entries." + entry.id + ".memory_budget";
    throw std::runtime_error(key + " " + model.memory_budget + " (io backend " + config.io_backend + "): " + e.what());
  }
  server::EngineOptions engine_options;
  engine_options.threads = config.threads;
  if (loaded->offloaded_ffn()) {
    const server::GetEnv getenv = [](const char* name) -> const char* { return std::getenv(name); };
    engine_options.activation_state = server::activation_state_path(config, entry.path, getenv);
    engine_options.replan_tokens = static_cast<uint64_t>(config.replan_tokens);
  }
  try {
    engine_options.context = model.context_options(*loaded);  // applies the profile's per-layer thresholds
  } catch (const std::exception& e) {
    if (model.profile_path.empty()) throw;
    throw std::runtime_error("sparse.profile " + model.profile_path + ": " + e.what());
  }
  engine_options.max_queued_jobs = config.queue;
  engine_options.slots = config.slots;
  engine_options.reuse_prefix = config.reuse_prefix;

  auto served = std::make_unique<server::ServedModel>();
  served->id = entry.id;
  served->demo = entry.demo;
  const std::string& template_name =
      entry.overrides.chat_template.empty() ? config.server.chat_template : entry.overrides.chat_template;
  served->chat_template = server::served_chat_template(template_name, *loaded);
  try {
    // The contexts are made here, so a sparse mode the model cannot run fails now, not at the
    // first request.
    served->owned = std::make_unique<server::EngineWorker>(std::move(loaded), engine_options);
  } catch (const std::invalid_argument& e) {
    if (engine_options.context.sparse.mode == SparseOptions::Mode::Dense) throw;
    throw std::runtime_error(std::string("sparse.mode ") + sparse_mode_name(engine_options.context.sparse.mode) +
                             " does not fit this model: " + e.what());
  }
  served->engine = served->owned.get();
  server::EngineWorker& engine = *served->engine;
  if (config.memory_pressure && engine.configured_cache_budget() > 0) {
    served->pressure = std::make_unique<server::MemoryPressureWatcher>(
        engine, server::PressureWatchOptions{}, [log, id = entry.id](const std::string& line) {
          log("model '" + id + "': " + line);
        });
  }
  served->account_bytes = served_bytes(engine);

  const SparseOptions& so = engine_options.context.sparse;
  const std::string sparse_note =
      (so.mode == SparseOptions::Mode::Dense ? "" : std::string(", sparse FFN ") + sparse_mode_name(so.mode)) +
      (model.memory_budget.empty() ? "" : ", memory budget " + model.memory_budget);
  served->summary = "context " + std::to_string(engine.n_ctx()) + ", " + std::to_string(engine.threads()) +
                    " threads, " + kernel_set_name(active_kernel_set()) + " kernels, " +
                    std::string(chat_template_name(served->chat_template)) + " chat template, " +
                    std::to_string(config.slots) + (config.slots == 1 ? " slot" : " slots") +
                    (config.reuse_prefix ? ", prefix reuse" : "") + sparse_note;
  return served;
}

uint64_t estimate_served_bytes(const server::ServeConfig& config, const server::ModelEntry& entry) {
  const ModelOptions model = entry_options(config, entry);
  const uint64_t weights =
      model.memory_budget.empty() ? entry.file_bytes : cache::parse_memory_budget(model.memory_budget, entry.file_bytes);
  // The header only: bounded reads of the metadata, no tensor data.
  const gguf::GgufFile file = gguf::GgufFile::open(entry.path);
  const ModelConfig c = read_model_config(file.metadata());
  const int64_t n_ctx = model.ctx_size > 0 ? model.ctx_size : std::min<int64_t>(c.n_ctx_train, ContextOptions::kDefaultMaxContext);
  constexpr uint64_t kF16Bytes = 2;  // the KV cache holds F16 (core/model/kv_cache.h)
  const uint64_t kv_per_slot = 2 * uint64_t(c.n_layer) * uint64_t(n_ctx) * uint64_t(c.n_embd_kv()) * kF16Bytes;
  return weights + kv_per_slot * uint64_t(std::max(1, config.slots));
}

uint64_t served_bytes(const server::EngineWorker& engine) {
  const server::EngineMetrics m = engine.metrics();
  const uint64_t weights =
      m.memory_budget_bytes > 0 ? m.memory_budget_bytes + m.memory_io_buffer_bytes : m.model_bytes;
  return weights + m.kv_cache_bytes;
}

}  // namespace ember::cli
