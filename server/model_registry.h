#pragma once
// Which of the catalog's models are loaded, for whom, and for how long (the daemon that shares a
// device: Ollama's model scheduling, with one memory account). A request leases its model: while
// any lease is held the model stays loaded; when the last one ends, the model's keep-alive starts
// (the request's `keep_alive`, else the server's; negative: forever; 0: unload now). A model not
// loaded is loaded by the registry's own thread, so a load never holds an I/O thread or a request
// to another model. Before a load, idle models are unloaded, least recently used first, until at
// most `max_loaded` models are loaded and their memory account fits the limit; when busy models
// leave no room the request gets a 503 that names the need. The pinned model (`-m`) is loaded at
// startup and never unloaded for being idle or to make room.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/chat/chat_template.h"
#include "server/engine_worker.h"
#include "server/memory_pressure.h"
#include "server/model_catalog.h"

namespace ember::server {

// One loaded model as the server runs it.
struct ServedModel {
  std::string id;
  bool demo = false;
  ChatTemplate chat_template = ChatTemplate::ChatML;
  uint64_t account_bytes = 0;  // what it counts against the memory limit
  std::string summary;         // how it runs ("context 2048, 2 threads, ..."), for the log
  std::unique_ptr<EngineWorker> owned;  // null when the engine belongs to someone else (tests)
  EngineWorker* engine = nullptr;
  // Declared after `owned`: destroyed before the engine it watches.
  std::unique_ptr<MemoryPressureWatcher> pressure;
};

// The chat template family a model is served with: `override_name` (a family name) when given,
// else the one the model's GGUF names or implies. Throws std::invalid_argument for an unknown name.
ChatTemplate served_chat_template(const std::string& override_name, const Model& model);

struct RegistryOptions {
  size_t max_loaded = 3;
  std::chrono::milliseconds keep_alive = std::chrono::minutes(5);  // negative: forever
  uint64_t memory_limit = 0;  // bytes for all loaded models' accounts; 0: no limit
};

// Why a model cannot be had: the HTTP status and error code the client gets.
class ModelUnavailable : public std::runtime_error {
 public:
  ModelUnavailable(int status, std::string code, const std::string& message, std::string param = {})
      : std::runtime_error(message), status_(status), code_(std::move(code)), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& code() const { return code_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string code_, param_;
};

class ModelRegistry;

// A request's hold on a loaded model. Copies share it; the last one to go ends the hold.
class ModelLease {
 public:
  ~ModelLease();
  ModelLease(const ModelLease&) = delete;
  ModelLease& operator=(const ModelLease&) = delete;
  ServedModel& model() const { return *model_; }
  EngineWorker& engine() const { return *model_->engine; }

 private:
  friend class ModelRegistry;
  struct Core;
  ModelLease(std::shared_ptr<Core> core, std::shared_ptr<ServedModel> model,
             std::optional<std::chrono::milliseconds> keep_alive, bool touch)
      : core_(std::move(core)), model_(std::move(model)), keep_alive_(keep_alive), touch_(touch) {}
  std::shared_ptr<Core> core_;
  std::shared_ptr<ServedModel> model_;
  std::optional<std::chrono::milliseconds> keep_alive_;
  bool touch_;  // false: a look (metrics) that neither keeps the model nor restarts its keep-alive
};
using LeasePtr = std::shared_ptr<ModelLease>;

struct ModelStatus {
  ModelEntry entry;
  bool loaded = false;
  bool loading = false;
  int active = 0;                          // leases held
  uint64_t account_bytes = 0;              // when loaded
  std::optional<std::chrono::milliseconds> unloads_in;  // idle and not kept forever
};

struct RegistryCounters {
  size_t loaded = 0;
  uint64_t account_bytes = 0;
  uint64_t memory_limit = 0;
  uint64_t loads = 0, load_failures = 0;
  uint64_t unloads_idle = 0, unloads_evicted = 0, unloads_requested = 0, unloads_pressure = 0;
};

class ModelRegistry {
 public:
  using Loader = std::function<std::unique_ptr<ServedModel>(const ModelEntry&)>;
  // What a model will count against the limit, before it is loaded (its account once loaded).
  using Estimate = std::function<uint64_t(const ModelEntry&)>;
  using Log = std::function<void(const std::string&)>;
  // Called exactly once: a lease, or why not (ModelUnavailable, or the loader's exception). May
  // run on the caller's thread (the model was loaded) or on the registry's thread.
  using Ready = std::function<void(LeasePtr, std::exception_ptr)>;

  ModelRegistry(std::unique_ptr<ModelCatalog> catalog, RegistryOptions options, Loader loader, Estimate estimate, Log log);
  ~ModelRegistry();  // stop()
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  // `id` empty: the default model (the pinned one, else the only one; else a 400 asking for one).
  void acquire(std::string_view id, std::optional<std::chrono::milliseconds> keep_alive, Ready ready);
  // Loads the catalog's model `id` on this thread and keeps it (startup). Throws what the load
  // throws, or ModelUnavailable.
  void load_now(std::string_view id);
  // Serves an already loaded model (an engine attached from outside), pinned.
  void adopt(ModelEntry entry, std::unique_ptr<ServedModel> model);

  enum class UnloadResult { Unloaded, WhenIdle, NotLoaded };
  UnloadResult unload(std::string_view id);
  // Unloads every idle model that is not pinned (memory pressure); returns how many.
  size_t unload_idle(const std::string& reason);

  std::vector<ModelStatus> status();
  RegistryCounters counters();
  std::optional<std::string> default_id();
  bool knows(std::string_view id);
  // A look at a loaded model for /metrics: the default one when loaded, else the most recently
  // used; null when none is loaded. Neither keeps it loaded nor restarts its keep-alive.
  LeasePtr peek();
  ModelCatalog& catalog() { return *catalog_; }

  // Fails waiting loads (503 server_shutdown) and stops the registry's thread; then stops every
  // loaded engine (running jobs end as cancelled). Idempotent.
  void stop();

 private:
  using Core = ModelLease::Core;
  void run();
  void load(const std::string& id);
  void fail(std::vector<std::pair<std::optional<std::chrono::milliseconds>, Ready>> waiters, std::exception_ptr e);

  std::unique_ptr<ModelCatalog> catalog_;
  Loader loader_;
  Estimate estimate_;
  std::shared_ptr<Core> core_;
  std::thread thread_;
};

}  // namespace ember::server
