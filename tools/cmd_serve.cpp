// `ember serve`: the daemon. Merges the configuration (flags > environment > file > defaults, see
// server/serve_config.h and config/README.md), starts the HTTP server first so /health answers 503
// while the pinned model (-m, or the demo model) loads, then serves the catalog's models by name
// (server/model_registry.h: others load on first use) until SIGINT/SIGTERM; running streams get
// the configured grace period, then it exits 0.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/cache/budget_planner.h"
#include "core/sparse/activation_profile.h"
#include "server/access_control.h"
#include "server/http_server.h"
#include "server/listen_spec.h"
#include "server/keep_alive.h"
#include "server/model_registry.h"
#include "server/serve_config.h"
#include "tools/model_options.h"
#include "tools/serve_models.h"
#include "tools/subcommands.h"

namespace ember::cli {
namespace {

using nlohmann::json;

// What the command line says. Values are only used for the flags actually given (CLI11's count()),
// so an absent flag never overrides the environment or the file.
struct ServeFlags {
  ModelOptions model;
  std::string config_path;
  bool print_config = false;
  std::string alias, chat_template, host, api_key_file, activation_state;
  std::string models_dir, keep_alive, memory_limit;
  int64_t max_loaded_models = 0;
  int64_t replan_tokens = 0;
  int64_t port = 0, queue = 0, parallel = 0, io_threads = 0, max_body = 0, max_tokens = 0;
  int64_t request_timeout = 0, shutdown_grace = 0;
  std::vector<std::string> listen, api_keys, cors_origins, allowed_hosts;
  bool no_tcp = false, no_prefix_reuse = false, no_memory_pressure = false;
};

// Applies the given flags on top of `config`, each through the same checks as the file's keys, so
// a bad value gets the same message naming the flag.
void apply_flags(server::ServeConfig& config, const CLI::App& sub, const ServeFlags& f) {
  auto set = [&](const char* flag, const char* section, const char* key, json value) {
    if (sub.count(flag) == 0) return;
    server::apply_config_json(config, json{{section, json{{key, std::move(value)}}}}, std::string("flag ") + flag);
  };
  const ModelOptions& m = f.model;
  set("--model", "model", "path", m.model_path);
  set("--threads", "model", "threads", m.threads);
  set("--ctx-size", "model", "ctx_size", m.ctx_size);
  set("--batch-size", "model", "batch_size", m.batch);
  set("--no-mmap", "model", "mmap", !m.no_mmap);
  set("--no-repack", "model", "repack", !m.no_repack);
  set("--alias", "model", "alias", f.alias);
  set("--chat-template", "model", "chat_template", f.chat_template);
  set("--models-dir", "models", "dir", f.models_dir);
  set("--max-loaded-models", "models", "max_loaded", f.max_loaded_models);
  set("--keep-alive", "models", "keep_alive", f.keep_alive);
  set("--memory-limit", "memory", "limit", f.memory_limit);
  set("--queue", "engine", "queue", f.queue);
  set("--parallel", "engine", "parallel", f.parallel);
  set("--no-prefix-reuse", "engine", "prefix_reuse", !f.no_prefix_reuse);
  set("--no-memory-pressure", "memory", "pressure", !f.no_memory_pressure);
  set("--sparse", "sparse", "mode", m.sparse_mode);
  set("--sparse-threshold", "sparse", "threshold", m.sparse_threshold);
  set("--sparsity", "sparse", "sparsity", m.sparsity);
  set("--profile", "sparse", "profile", m.profile_path);
  set("--sparse-stats", "sparse", "stats", m.sparse_stats);
  set("--memory-budget", "memory", "budget", m.memory_budget);
  set("--io-backend", "memory", "io_backend", m.io_backend);
  set("--no-prefetch", "memory", "prefetch", false);
  set("--prefetch", "memory", "prefetch", true);
  set("--activation-state", "memory", "activation_state", f.activation_state);
  set("--replan-tokens", "memory", "replan_tokens", f.replan_tokens);
  set("--host", "server", "host", f.host);
  set("--port", "server", "port", f.port);
  set("--no-tcp", "server", "tcp", !f.no_tcp);
  set("--listen", "server", "listen", f.listen);
  set("--io-threads", "server", "io_threads", f.io_threads);
  set("--max-body", "server", "max_body_bytes", f.max_body);
  set("--request-timeout", "server", "request_timeout_seconds", f.request_timeout);
  set("--shutdown-grace", "server", "shutdown_grace_seconds", f.shutdown_grace);
  set("--max-tokens", "limits", "max_tokens", f.max_tokens);
  set("--api-key", "security", "api_keys", f.api_keys);
  set("--api-key-file", "security", "api_key_file", f.api_key_file);
  set("--cors-origin", "security", "cors_origins", f.cors_origins);
  set("--allow-host", "security", "allowed_hosts", f.allowed_hosts);
}

// defaults < file (--config, else $EMBER_CONFIG) < environment < flags.
server::ServeConfig merged_config(const CLI::App& sub, const ServeFlags& f) {
  const server::GetEnv getenv = [](const char* name) -> const char* { return std::getenv(name); };
  server::ServeConfig config;
  std::optional<std::string> file;
  if (sub.count("--config") > 0) file = f.config_path;
  else file = server::config_file_from_environment(getenv);
  if (file) {
    server::load_config_file(config, *file);
    std::fprintf(stderr, "ember: config file %s\n", file->c_str());
  }
  server::apply_environment(config, getenv);
  apply_flags(config, sub, f);
  server::check_config(config);
  return config;
}

// The load's checkpoint: abandons it (LoadCancelled) once SIGTERM or SIGINT has arrived, so the
// daemon stops within a tensor or a read instead of after a load that may take minutes.
// EMBER_TEST_LOAD_DELAY_MS (tests only: a deterministic slow load of a tiny model) makes each
// checkpoint wait that long first.
LoadCheckpoint stop_on_signal(const server::HttpServer& http) {
  std::chrono::milliseconds delay{0};
  if (const char* ms = std::getenv("EMBER_TEST_LOAD_DELAY_MS")) delay = std::chrono::milliseconds(std::atoll(ms));
  return [&http, delay] {
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    if (http.signal_received()) throw LoadCancelled("a signal arrived while the model was loading");
  };
}

void log_line(const std::string& line) { std::fprintf(stderr, "ember: %s\n", line.c_str()); }

int serve(const server::ServeConfig& config) {
  server::ServerOptions options = config.server;
  options.api_keys = server::effective_api_keys(config);  // reads the key file now: fail before binding

  const ModelOptions model = serve_model_options(config);
  if (!model.profile_path.empty()) {
    // Read it now, before binding and loading the model, so a bad file fails fast; its shape is
    // checked against the model once that is loaded.
    try {
      load_activation_profile(model.profile_path);
    } catch (const std::exception& e) {
      throw std::runtime_error("sparse.profile " + model.profile_path + ": " + e.what());
    }
  }
  // The -m model is pinned; with no model anywhere the built-in demo model is.
  const bool has_others = !config.models_dir.empty() || !config.model_entries.empty();
  options.demo_model = config.model_path.empty() && !has_others;
  std::string pinned_path;
  if (!config.model_path.empty() || options.demo_model) {
    pinned_path = model.resolve_model_path();  // creates the demo model when needed
    options.model_id = config.alias.empty() ? std::filesystem::path(pinned_path).stem().string() : config.alias;
  }
  if (options.demo_model)
    std::fprintf(stderr,
                 "ember: serving the demo model as '%s'; to serve a real model pass -m MODEL.gguf (or set "
                 "EMBER_MODEL, or model.path in the config file, or --models-dir DIR)\n",
                 options.model_id.c_str());
  if (options.api_keys.empty()) {
    for (const server::ListenSpec& spec : server::listen_specs(options)) {
      if (spec.kind == server::ListenSpec::Kind::Tcp && !server::is_loopback_listen_host(spec.host))
        std::fprintf(stderr,
                     "ember: warning: listening on %s without API keys: anyone who can reach it can use the model "
                     "(see --api-key-file)\n",
                     spec.to_string().c_str());
    }
  }
  // The catalog checks every configured file now (before binding), naming the one that is wrong.
  std::vector<server::ModelEntry> fixed = config.model_entries;
  if (!pinned_path.empty()) {
    server::ModelEntry pinned;
    pinned.id = options.model_id;
    pinned.path = pinned_path;
    pinned.pinned = true;
    pinned.demo = options.demo_model;
    fixed.insert(fixed.begin(), std::move(pinned));
  }
  auto catalog = std::make_unique<server::ModelCatalog>(config.models_dir, std::move(fixed), log_line);
  server::RegistryOptions registry_options;
  registry_options.max_loaded = size_t(config.max_loaded_models);
  registry_options.keep_alive = config.keep_alive;
  if (!config.memory_limit.empty())
    registry_options.memory_limit = cache::parse_memory_budget(config.memory_limit, uint64_t{1} << 40);

  // Declared before the server so it outlives it: the server's destructor may still reach it.
  std::unique_ptr<server::ModelRegistry> models;
  server::HttpServer http(options);  // binds every endpoint; throws naming the one that failed
  http.start(config.io_threads);
  for (const std::string& endpoint : http.endpoints()) {
    const bool is_unix = endpoint.rfind("unix:", 0) == 0;
    std::fprintf(stderr, "ember: listening on %s%s\n", is_unix ? "" : "http://", endpoint.c_str());
  }

  const LoadCheckpoint checkpoint = stop_on_signal(http);
  models = std::make_unique<server::ModelRegistry>(
      std::move(catalog), registry_options,
      [&config, checkpoint](const server::ModelEntry& entry) {
        return load_served_model(config, entry, checkpoint, log_line);
      },
      [&config](const server::ModelEntry& entry) { return estimate_served_bytes(config, entry); }, log_line);
  std::string pinned_summary;
  if (!pinned_path.empty()) {
    // Loaded here rather than by the registry's thread, so a failure stops the daemon with its own
    // message. /health answers 503 until then: the server is attached after it.
    std::fprintf(stderr, "ember: loading model %s\n", pinned_path.c_str());
    const server::ModelEntry pinned = *models->catalog().find(options.model_id);
    std::unique_ptr<server::ServedModel> served;
    try {
      served = load_served_model(config, pinned, checkpoint, log_line);
    } catch (const LoadCancelled&) {
      // SIGTERM/SIGINT while loading: a normal shutdown, only earlier (nothing to finish yet).
      std::fprintf(stderr, "ember: shutting down: interrupted while loading the model\n");
      models->stop();
      http.stop(std::chrono::milliseconds(0));
      return 0;
    }
    if (registry_options.memory_limit > 0 && served->account_bytes > registry_options.memory_limit) {
      throw std::runtime_error("memory.limit " + config.memory_limit + " is less than the model " + pinned_path +
                               " holds once loaded (" + std::to_string(served->account_bytes >> 20) + " MiB)");
    }
    pinned_summary = served->summary;
    models->adopt(pinned, std::move(served));
  }
  http.attach(*models);
  // "ready" only once requests are answered (tests and scripts wait for it).
  if (!pinned_path.empty()) log_line("ready: model '" + options.model_id + "' (" + pinned_summary + ")");
  const std::vector<server::ModelEntry> listed = models->catalog().entries();
  if (has_others) {
    std::string from;
    if (!config.models_dir.empty()) from = " from " + models->catalog().dir();
    log_line(std::string(pinned_path.empty() ? "ready: " : "") + "serving " + std::to_string(listed.size()) +
             (listed.size() == 1 ? " model" : " models") + from + " (at most " + std::to_string(config.max_loaded_models) +
             " loaded, keep-alive " + server::keep_alive_text(config.keep_alive) +
             (config.memory_limit.empty() ? "" : ", memory limit " + config.memory_limit) + ")");
  }

  http.wait_for_signal();
  std::fprintf(stderr, "ember: shutting down (grace %llds)\n", (long long)options.shutdown_grace.count());
  http.stop(options.shutdown_grace);  // stops the registry's engines once the streams are done
  return 0;
}

}  // namespace

void register_serve(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<ServeFlags>();
  const server::ServeConfig defaults;
  CLI::App* sub = app.add_subcommand(
      "serve",
      "Serve a model over an OpenAI-compatible HTTP API. Settings come from flags, then EMBER_* environment "
      "variables, then the config file, then the defaults (config/README.md lists them all)");
  f->model.demo_if_missing = true;
  f->model.add_to(*sub);
  auto d = [](auto v) { return " (default " + std::to_string(v) + ")"; };

  sub->add_option("--config", f->config_path, "JSON config file (default: $EMBER_CONFIG, else none)");
  sub->add_flag("--print-config", f->print_config,
                "Print the merged configuration as JSON (API keys masked) and exit without loading the model");
  sub->add_option("--alias", f->alias, "Model id reported by the API (default: the model file's name)");
  sub->add_option("--chat-template", f->chat_template,
                  "Chat template family for /v1/chat/completions: " + chat_template_names() +
                      " (default: recognised from the model)");
  sub->add_option("--models-dir", f->models_dir,
                  "Also serve every <id>.gguf in this directory as model <id>, loaded on first use (default: none)");
  sub->add_option("--max-loaded-models", f->max_loaded_models,
                  "Models loaded at once; the least recently used idle one is unloaded for another" +
                      d(defaults.max_loaded_models));
  sub->add_option("--keep-alive", f->keep_alive,
                  "How long an idle model stays loaded: seconds or 30s/5m/1h; -1 forever, 0 unload after each "
                  "request (default " + server::keep_alive_text(defaults.keep_alive) + ")");
  sub->add_option("--memory-limit", f->memory_limit,
                  "Total size all loaded models may use (weights or budgets, caches, KV caches), e.g. 8G; idle "
                  "models are unloaded to make room (default: no limit)");
  sub->add_option("--queue", f->queue, "Requests that may wait for the engine; more get 503" + d(defaults.queue));
  sub->add_option("--parallel", f->parallel,
                  "Requests generated together, each with its own KV cache" + d(defaults.slots));
  sub->add_flag("--no-prefix-reuse", f->no_prefix_reuse,
                "Start every request from an empty KV cache instead of reusing a cached common prefix");
  sub->add_flag("--no-memory-pressure", f->no_memory_pressure,
                "Under --memory-budget, keep the neuron cache's budget fixed instead of shrinking it while the "
                "system is short of memory (Linux PSI)");
  f->model.add_sparse_to(*sub);  // --sparse, --sparse-threshold, --sparsity, --sparse-stats, --profile
  f->model.add_memory_to(*sub);  // --memory-budget, --io-backend
  sub->add_option("--activation-state", f->activation_state,
                  "File of the live activation counts under --memory-budget: loaded at start, saved at shutdown "
                  "(default: <state dir>/<model file>.activations, see config/README.md; \"\" = none)");
  sub->add_option("--replan-tokens", f->replan_tokens,
                  "Re-plan the hot neurons after this many decoded tokens under --memory-budget; 0 = never" +
                      d(defaults.replan_tokens));
  sub->add_option("--host", f->host, "Address to listen on (default " + defaults.server.host + ")");
  sub->add_option("--port", f->port, "Port to listen on; 0 = any free port" + d(defaults.server.port));
  sub->add_flag("--no-tcp", f->no_tcp, "Do not listen on --host/--port (only on the --listen endpoints)");
  sub->add_option("--listen", f->listen, "Also listen on unix:/path/to.sock or HOST:PORT (repeatable)")
      ->allow_extra_args(false);
  sub->add_option("--io-threads", f->io_threads, "Threads serving connections" + d(defaults.io_threads));
  sub->add_option("--max-body", f->max_body, "Largest request body in bytes" + d(defaults.server.max_body_bytes));
  sub->add_option("--request-timeout", f->request_timeout,
                  "Seconds a request may take, queueing included" + d(defaults.server.request_timeout.count()));
  sub->add_option("--shutdown-grace", f->shutdown_grace,
                  "Seconds running requests may finish after SIGTERM" + d(defaults.server.shutdown_grace.count()));
  sub->add_option("--max-tokens", f->max_tokens,
                  "Cap on a request's max_tokens (the context window caps it too)" +
                      d(defaults.server.limits.max_tokens));
  sub->add_option("--api-key", f->api_keys,
                  "Accept this API key (repeatable). Visible to other users in `ps`: prefer --api-key-file or "
                  "EMBER_API_KEY")
      ->allow_extra_args(false);
  sub->add_option("--api-key-file", f->api_key_file,
                  "File of API keys, one per line ('#' comments); requests then need one (default: no keys, no auth)");
  sub->add_option("--cors-origin", f->cors_origins,
                  "Allow browser calls from this origin, e.g. http://localhost:3000, or * (repeatable; default: CORS off)")
      ->allow_extra_args(false);
  sub->add_option("--allow-host", f->allowed_hosts,
                  "Also accept this Host header name while bound to loopback (repeatable; DNS-rebinding protection)")
      ->allow_extra_args(false);

  sub->callback([f, sub, &exit_code] {
    const server::ServeConfig config = merged_config(*sub, *f);
    if (f->print_config) {
      std::printf("%s\n", server::to_json(config).dump(2).c_str());
      exit_code = 0;
      return;
    }
    exit_code = serve(config);
  });
}

}  // namespace ember::cli
