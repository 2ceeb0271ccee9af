#pragma once
// How `ember serve` turns a catalog entry into a running model: the model options the merged
// configuration asks for (with the entry's own overrides), the load, the engine, the pressure
// watcher; and what a model will count against `memory.limit` before it is loaded.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/model/model.h"
#include "server/model_registry.h"
#include "server/serve_config.h"
#include "tools/model_options.h"

namespace ember::cli {

// The server-wide model options of `config` (the -m model's, and every other model's before its
// entry's overrides).
ModelOptions serve_model_options(const server::ServeConfig& config);

using ServeLog = std::function<void(const std::string&)>;

// Loads `entry` as `config` and the entry's overrides say. `checkpoint` runs between tensors (a
// signal abandons the load). Throws with a message naming the setting that failed.
std::unique_ptr<server::ServedModel> load_served_model(const server::ServeConfig& config,
                                                       const server::ModelEntry& entry,
                                                       const LoadCheckpoint& checkpoint, const ServeLog& log);

// Before a load: the weights (the file, or its memory budget) plus the KV caches of every slot at
// the context the model will run with (read from the file's metadata only).
uint64_t estimate_served_bytes(const server::ServeConfig& config, const server::ModelEntry& entry);

// After a load: what the model holds (weights or budget and read buffers, plus KV caches).
uint64_t served_bytes(const server::EngineWorker& engine);

}  // namespace ember::cli
