// `ember serve`: the daemon. Loads one model, starts the engine thread and the HTTP server, and
// runs until SIGINT/SIGTERM, then lets running requests finish (short grace) and exits 0.
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/kernels/type_traits.h"
#include "server/engine_worker.h"
#include "server/http_server.h"
#include "tools/model_options.h"
#include "tools/subcommands.h"

namespace ember::cli {
namespace {

struct ServeOptions {
  ModelOptions model;
  server::ServerOptions http;
  std::string alias;
  size_t queue = 16;
  int io_threads = 1;
};

int serve(ServeOptions& o) {
  const std::string model_path = o.model.resolve_model_path();
  o.http.model_id = o.alias.empty() ? std::filesystem::path(model_path).stem().string() : o.alias;

  server::EngineOptions engine_options;
  engine_options.threads = o.model.threads;
  engine_options.context = o.model.context_options();
  engine_options.max_queued_jobs = o.queue;
  server::EngineWorker engine(Model::load(model_path, o.model.load_options()), engine_options);

  server::HttpServer http(engine, o.http);
  http.start(o.io_threads);
  std::fprintf(stderr,
               "ember: serving %s as '%s' on http://%s:%u (context %lld, %d threads, %s kernels, %s chat template)\n",
               model_path.c_str(), o.http.model_id.c_str(), o.http.host.c_str(), http.port(),
               (long long)engine.n_ctx(), engine.threads(), kernel_set_name(active_kernel_set()),
               std::string(chat_template_name(http.chat_template())).c_str());
  http.wait_for_signal();
  std::fprintf(stderr, "ember: shutting down\n");
  http.stop(std::chrono::seconds(5));
  return 0;
}

}  // namespace

void register_serve(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ServeOptions>();
  CLI::App* sub = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  opts->model.demo_if_missing = true;
  opts->model.add_to(*sub);
  sub->add_option("--host", opts->http.host, "Address to listen on (default 127.0.0.1)");
  sub->add_option("--port", opts->http.port, "Port to listen on; 0 = any free port (default 8080)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--alias", opts->alias, "Model id reported by the API (default: the model file's name)");
  sub->add_option("--queue", opts->queue, "Requests that may wait for the engine; more get 503 (default 16)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 16));
  sub->add_option("--max-body", opts->http.max_body_bytes, "Largest request body in bytes (default 1 MiB)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30));
  sub->add_option("--chat-template", opts->http.chat_template,
                  "Chat template family for /v1/chat/completions (default: recognised from the model)");
  sub->callback([opts, &exit_code] { exit_code = serve(*opts); });
}

}  // namespace ember::cli
