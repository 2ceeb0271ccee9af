#pragma once
// Everything `ember serve` can be told, and how it is told: a JSON file, EMBER_* environment
// variables and command-line flags, merged with the precedence flags > environment > file >
// defaults. This file knows the file and the environment; tools/cmd_serve.cpp applies the flags
// last. config/ember.json lists every key at its default and config/README.md documents each key
// with its variable and flag (a test keeps all three in step with the table in serve_config.cpp).
// No Asio and no CLI11 here, so the whole merge is unit-testable.
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/sparse/sparse_settings.h"
#include "server/model_catalog.h"
#include "server/server_state.h"

namespace ember::server {

struct ServeConfig {
  // "model" section
  std::string model_path;  // empty: the built-in demo model
  std::string alias;       // model id reported by the API; empty: the model file's name
  int threads = 0;         // 0: one per physical core
  int64_t ctx_size = 0;    // 0: the model's training context, at most 4096
  int64_t batch = 512;     // prompt tokens per forward step
  bool mmap = true;        // false: read the weights into memory
  bool repack = true;      // keep interleaved Q4_0 copies (faster, costs their size in memory)
  // "engine" section
  size_t queue = 16;          // requests that may wait for a slot; more get 503
  int slots = 1;              // sequences generated together (`--parallel`)
  bool reuse_prefix = true;   // continue a slot's cached tokens that a new prompt shares
  // "sparse" section: how decode steps run the FFN (core/sparse; the same rules as `ember run
  // --sparse ...`, see core/sparse/sparse_settings.h).
  std::string sparse_mode = "dense";  // dense, oracle, predictor, threshold
  double sparse_threshold = std::numeric_limits<double>::quiet_NaN();  // NaN (null): the model's own
  double sparsity = 0.0;              // 0: off; else the threshold mode skipping this fraction
  std::string sparse_profile;         // per-layer thresholds from `ember profile`; empty: none
  bool sparse_stats = false;          // also count recall/precision (a dense gate per token: slower)
  // "memory" section: a memory budget for neuron-bundle packs (core/cache/README.md).
  std::string memory_budget;          // SIZE ("2G", "512M") or "P%" of the model file; empty: all in RAM
  std::string io_backend = "auto";    // auto, uring, pread: how cold bundles are read
  // Read each layer's predicted bundles before its attention; unset ("auto"): the pack's default
  // (on for dense packs, off for mixtures of experts: OffloadOptions::prefetch).
  std::optional<bool> prefetch;
  // Where the live activation counts are saved at shutdown and read at start. nullopt: the default
  // place (activation_state_path()); "": not saved or loaded.
  std::optional<std::string> activation_state;
  int64_t replan_tokens = 8192;       // re-plan the hot set after this many decoded tokens; 0: never
  bool memory_pressure = true;        // shrink the neuron cache under memory pressure (server/memory_pressure.h)
  // All loaded models' weights, neuron caches and KV caches together: a SIZE; empty: no limit.
  std::string memory_limit;
  // "models" section: several models by name (server/model_registry.h).
  std::string models_dir;             // every <id>.gguf there is served as <id>; empty: none
  int64_t max_loaded_models = 3;      // loaded at once; the least recently used idle one goes first
  std::chrono::milliseconds keep_alive{std::chrono::minutes(5)};  // idle time before unload; <0 forever
  std::vector<ModelEntry> model_entries;  // models.entries: id -> file and per-model settings
  // "server" section (with the fields of `server` below)
  int io_threads = 1;
  // "security" section: a file of keys, read at startup and added to server.api_keys.
  std::string api_key_file;
  // host, port, listen, limits, chat_template, api_keys, cors_origins, allowed_hosts, ...
  // model_id and demo_model are not settings: `ember serve` derives them from the model.
  ServerOptions server;
};

// Applies the keys present in `config` (a partial document is fine; absent keys keep their value).
// The layout is {"model":{...}, "models":{...}, "engine":{...}, "sparse":{...}, "memory":{...},
// "server":{...}, "limits":{...}, "security":{...}}.
// Throws std::runtime_error naming `source` and the key for an unknown key, a wrong type or a
// value out of range.
void apply_config_json(ServeConfig& config, const nlohmann::json& document, const std::string& source);

// Parses and applies a config file. Throws std::runtime_error naming the file when it cannot be
// read, is not JSON, or has a bad key.
void load_config_file(ServeConfig& config, const std::string& path);

// What EMBER_CONFIG says (nullopt when unset or empty); the file is the --config flag, else this.
using GetEnv = std::function<const char*(const char* name)>;
std::optional<std::string> config_file_from_environment(const GetEnv& getenv);

// Applies every EMBER_* variable that is set and not empty (see config/README.md). Lists
// (EMBER_LISTEN, EMBER_API_KEY, EMBER_CORS_ORIGINS, EMBER_ALLOWED_HOSTS) are comma-separated;
// booleans are 1/0, true/false, yes/no, on/off. Throws std::runtime_error naming the variable.
void apply_environment(ServeConfig& config, const GetEnv& getenv);

// Checks what no single key can (`server.tcp` false with an empty `server.listen` leaves nothing
// to listen on; sparse settings that conflict, e.g. sparse.sparsity with sparse.mode predictor).
// Throws std::runtime_error.
void check_config(const ServeConfig& config);

// The "sparse" section as the settings core/sparse resolves (sparsity 0 becomes "not given").
SparseSettings sparse_settings(const ServeConfig& config);
// The sparse options the section asks for, without the profile's per-layer thresholds (those need
// the model). Throws std::runtime_error naming the key for conflicting settings.
SparseOptions sparse_options(const ServeConfig& config);

// The file the live activation counts of `model_path` are kept in: memory.activation_state when
// set ("" stays "": off), else `<dir>/<model file name>.activations` with <dir> the first entry of
// $STATE_DIRECTORY (systemd's StateDirectory=), else $XDG_STATE_HOME/ember, else
// $HOME/.local/state/ember; "" when none of them is set.
std::string activation_state_path(const ServeConfig& config, const std::string& model_path, const GetEnv& getenv);

// The merged configuration as the same JSON layout, every key present, in the order of
// config/ember.json; API keys become "***".
nlohmann::ordered_json to_json(const ServeConfig& config);

// Reads an API key file: one key per line; blank lines and lines starting with '#' are skipped;
// surrounding whitespace is trimmed. Throws std::runtime_error when the file cannot be read, a
// key contains whitespace, or no key is left.
std::vector<std::string> read_api_key_file(const std::string& path);

// server.api_keys plus the keys of api_key_file (when set): what the server should accept.
std::vector<std::string> effective_api_keys(const ServeConfig& config);

// The settings table, for documentation checks: "section.key" and its environment variable
// (empty when the setting has none).
struct SettingName {
  std::string key;
  std::string env;
};
std::vector<SettingName> setting_names();

}  // namespace ember::server
