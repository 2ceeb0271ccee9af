// `ember serve` under a memory budget, in process: a daemon on a tiny dReLU pack answers
// exactly as without a budget; a failed read fails only its request (the next one is right and
// /health stays ok); the neuron-cache metrics; the activation counts saved at stop, loaded at the
// next start, re-planned between jobs. The "memory" config section's rules are checked here too.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "core/cache/budget_planner.h"
#include "core/pack/pack_writer.h"
#include "core/synth/synth_writer.h"
#include "io/fault_injecting_reader.h"
#include "server/serve_config.h"
#include "tests/server/config_test_support.h"
#include "tests/server/http_test_support.h"

namespace ember::test_memory {
namespace {

using namespace ember::test_http;
using test_server::drelu_predictor_model_path;
using server::test::contains;
using server::test::Env;
using server::test::error_of;

// The tiny synthetic preset with a dReLU FFN and predictors, packed (identity order, no profile).
const std::string& tiny_pack_path() {
  static const std::string path = [] {
    pack::PackOptions p;
    p.source_path = drelu_predictor_model_path();
    p.output_path = (test_dir() / "memory-pack.gguf").string();
    pack::write_pack(p);
    return p.output_path;
  }();
  return path;
}

// The smallest budget the planner accepts for the pack (it says so in BudgetTooSmall).
uint64_t minimum_budget() {
  static const uint64_t minimum = [] {
    ModelLoadOptions o;
    o.offload.budget_bytes = 1;
    try {
      Model::load(tiny_pack_path(), o);
    } catch (const cache::BudgetTooSmall& e) {
      return e.minimum_bytes();
    }
    return uint64_t{0};
  }();
  return minimum;
}

// Room for a few hundred hot bundles above the minimum: some neurons hot, most cold.
uint64_t small_budget() { return minimum_budget() + 300 * 1024; }

struct Settings {
  uint64_t budget = 0;  // 0: the whole pack in RAM
  bool fault_reader = false;
  std::string activation_state;
  uint64_t replan_tokens = 0;
  io::IoBackend backend = io::IoBackend::Pread;  // works everywhere (io_uring may be blocked here)
  bool prefetch = true;
};

Settings budget_of(uint64_t budget, bool fault_reader = false, std::string state = {}, uint64_t replan_tokens = 0) {
  Settings s;
  s.budget = budget;
  s.fault_reader = fault_reader;
  s.activation_state = std::move(state);
  s.replan_tokens = replan_tokens;
  return s;
}

// A daemon on the tiny pack, predictor mode, one slot; its log lines are kept.
struct MemoryServer {
  explicit MemoryServer(const Settings& s) {
    ModelLoadOptions lo;
    lo.offload.budget_bytes = s.budget;
    lo.offload.backend = s.backend;
    lo.offload.prefetch = s.prefetch;
    if (s.fault_reader) {
      lo.offload.wrap_reader = [this](std::unique_ptr<io::BatchReader> inner) -> std::unique_ptr<io::BatchReader> {
        auto wrapped = std::make_unique<io::FaultInjectingReader>(std::move(inner));
        fault = wrapped.get();
        return wrapped;
      };
    }
    server::EngineOptions eo;
    eo.threads = 1;
    eo.context.n_ctx = 256;
    eo.context.sparse.mode = SparseOptions::Mode::Predictor;
    eo.slots = 1;
    eo.activation_state = s.activation_state;
    eo.replan_tokens = s.replan_tokens;
    eo.log = [this](const std::string& line) {
      std::lock_guard lock(log_mu);
      log_lines.push_back(line);
    };
    engine = std::make_unique<server::EngineWorker>(Model::load(tiny_pack_path(), lo), eo);
    http_server = std::make_unique<server::HttpServer>(*engine, test_options());
    http_server->start();
  }
  ~MemoryServer() { stop(); }
  void stop() {
    if (http_server) http_server->stop(std::chrono::seconds(1));
    http_server.reset();
    engine.reset();  // stop(): saves the activation counts
  }
  bool logged(const std::string& part) {
    std::lock_guard lock(log_mu);
    for (const std::string& l : log_lines)
      if (contains(l, part)) return true;
    return false;
  }
  std::string log_text() {
    std::lock_guard lock(log_mu);
    std::string all;
    for (const std::string& l : log_lines) all += l + "\n";
    return all;
  }
  uint16_t port() const { return http_server->port(); }

  io::FaultInjectingReader* fault = nullptr;  // set by wrap_reader at load
  std::mutex log_mu;
  std::vector<std::string> log_lines;
  std::unique_ptr<server::EngineWorker> engine;
  std::unique_ptr<server::HttpServer> http_server;
};

const char* kChat =
    R"({"messages":[{"role":"user","content":"tell me about the sea"}],"max_tokens":10,"temperature":0})";

Response chat(uint16_t port, bool stream = false) {
  Client c(port);
  std::string body = kChat;
  if (stream) body.insert(body.size() - 1, R"(,"stream":true)");
  return c.request(http::verb::post, "/v1/chat/completions", body);
}

std::string chat_text(uint16_t port) {
  const Response res = chat(port);
  INFO(res.body());
  REQUIRE(res.result_int() == 200);
  return body_json(res)["choices"][0]["message"]["content"].get<std::string>();
}

// The all-in-RAM answer, computed once.
const std::string& reference_text() {
  static const std::string text = [] {
    MemoryServer s(Settings{});
    return chat_text(s.port());
  }();
  return text;
}

std::string metrics_text(uint16_t port) {
  Client c(port);
  const Response res = c.request(http::verb::get, "/metrics");
  REQUIRE(res.result_int() == 200);
  return res.body();
}

// The value of the sample line starting with `name ` (name may carry labels); -1 when absent.
double sample_value(const std::string& text, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = ("\n" + text).find(key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size() - 1));
}

}  // namespace

TEST_CASE("memory server: a greedy chat answer under a small budget is the all-in-RAM one") {
  REQUIRE(minimum_budget() > 0);
  MemoryServer s(budget_of(small_budget()));
  const OffloadedFfn* off = s.engine->model().offloaded_ffn();
  REQUIRE(off != nullptr);
  // The budget really splits the pack: some bundles hot, the others read on demand.
  uint64_t hot = 0;
  for (uint32_t h : off->plan().hot) hot += h;
  const ModelConfig& c = s.engine->model().config();
  CHECK(hot > 0);
  CHECK(hot < static_cast<uint64_t>(c.n_layer * c.n_ff));
  CHECK(s.logged("memory budget "));
  CHECK(s.logged("pread"));

  CHECK(chat_text(s.port()) == reference_text());
  CHECK(off->stats().cache.misses > 0);
  // Again on the warm cache (and the slot's reused prefix): still the same.
  CHECK(chat_text(s.port()) == reference_text());
  // The smallest budget the planner allows (no hot neurons at all) too, reading with io_uring
  // where the system allows it (auto falls back to pread where it is blocked).
  Settings tight_settings = budget_of(minimum_budget());
  tight_settings.backend = io::IoBackend::Auto;
  MemoryServer tight(tight_settings);
  CHECK(chat_text(tight.port()) == reference_text());
}

TEST_CASE("memory server: a failed read fails only its request; the next one is right") {
  MemoryServer s(budget_of(small_budget(), true));
  REQUIRE(s.fault != nullptr);
  const std::string pack_name = std::filesystem::path(tiny_pack_path()).filename().string();
  // Every read from now on fails, like a bad disk.
  io::FaultPlan bad;
  bad.range_begin = 0;
  bad.range_end = std::numeric_limits<uint64_t>::max();
  s.fault->set_plan(bad);

  Response res = chat(s.port());
  INFO(res.body());
  CHECK(res.result_int() == 500);
  check_error_shape(res);
  json e = body_json(res)["error"];
  CHECK(e["code"] == "model_read_failed");
  CHECK(e["type"] == "server_error");
  const std::string message = e["message"].get<std::string>();
  CHECK(contains(message, pack_name));
  CHECK(contains(message, std::strerror(EIO)));

  // Streaming: the error is an SSE event, then [DONE]: a properly ended stream.
  res = chat(s.port(), /*stream=*/true);
  CHECK(res.result_int() == 200);
  const std::vector<std::string> events = sse_payloads(res.body());
  REQUIRE(events.size() >= 2);
  CHECK(events.back() == "[DONE]");
  const json last = json::parse(events[events.size() - 2]);
  REQUIRE(last.contains("error"));
  CHECK(last["error"]["code"] == "model_read_failed");

  {
    Client c(s.port());
    const Response health = c.request(http::verb::get, "/health");
    CHECK(health.result_int() == 200);
    CHECK(body_json(health)["status"] == "ok");
  }
  // The disk heals: the same request now gives the all-in-RAM answer (the failed job's slot was
  // reset, so no half-written cache positions are reused).
  s.fault->set_plan({});
  CHECK(chat_text(s.port()) == reference_text());
  CHECK(chat_text(s.port()) == reference_text());
  const std::string m = metrics_text(s.port());
  CHECK(sample_value(m, "ember_jobs_failed_total") == 2);
  CHECK(sample_value(m, "ember_jobs_completed_total") == 2);
}

void read_failing_mid_decode(bool prefetch) {
  Settings settings = budget_of(small_budget(), true);
  settings.prefetch = prefetch;
  MemoryServer s(settings);
  REQUIRE(s.fault != nullptr);
  CHECK(chat_text(s.port()) == reference_text());
  // Fail one read a little ahead: some request below hits it, wherever it lands (prefill or decode).
  io::FaultPlan plan;
  plan.fail_nth = static_cast<int64_t>(s.fault->reads_submitted()) + 3;
  s.fault->set_plan(plan);
  int failed = 0;
  for (int i = 0; i < 4; ++i) {
    const Response res = chat(s.port());
    if (res.result_int() == 200) {
      CHECK(body_json(res)["choices"][0]["message"]["content"] == reference_text());
    } else {
      ++failed;
      CHECK(res.result_int() == 500);
      CHECK(body_json(res)["error"]["code"] == "model_read_failed");
    }
  }
  // A prefetch read that fails is dropped and the step reads the bundle again: then nothing fails.
  if (prefetch) CHECK(failed <= 1);
  else CHECK(failed == 1);
}

TEST_CASE("memory server: a read failing in the middle of decoding") {
  read_failing_mid_decode(/*prefetch=*/false);
  read_failing_mid_decode(/*prefetch=*/true);
}

TEST_CASE("memory server: a re-plan whose reads fail leaves the daemon serving the same answers") {
  MemoryServer s(budget_of(small_budget(), true, {}, 1));
  REQUIRE(s.fault != nullptr);
  // The job's on_done runs on the engine thread just before the re-plan: the disk fails right then.
  std::promise<std::string> done;
  server::GenerationJob job;
  job.prompt = s.engine->model().tokenizer().encode("tell me about the sea", true, false);
  job.sampling.temperature = 0.0f;
  job.max_tokens = 8;
  job.on_text = [](std::string_view) {};
  io::FaultInjectingReader* fault = s.fault;
  job.on_done = [&done, fault](const GenerationStats&, std::exception_ptr e) {
    io::FaultPlan bad;
    bad.range_begin = 0;
    bad.range_end = std::numeric_limits<uint64_t>::max();
    fault->set_plan(bad);
    done.set_value(e ? "failed" : "");
  };
  REQUIRE(s.engine->try_submit(std::move(job)));
  CHECK(done.get_future().get() == "");
  // The re-plan changed the hot set (the pack has no profile; the live counts do) and its reads
  // failed; wait until that is published.
  double failures = 0;
  for (int i = 0; i < 500 && failures < 1; ++i) {
    failures = sample_value(metrics_text(s.port()), "ember_neuron_cache_replan_failures_total");
    if (failures < 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  INFO(s.log_text());
  REQUIRE(failures == 1);
  CHECK(s.logged("error: re-planning the neuron cache failed"));
  s.fault->set_plan({});
  // The cache was left without hot neurons: slower, still the same answers.
  CHECK(chat_text(s.port()) == reference_text());
  Client c(s.port());
  CHECK(c.request(http::verb::get, "/health").result_int() == 200);
}

TEST_CASE("memory server: /metrics has the neuron cache counters") {
  {
    MemoryServer plain(Settings{});
    const std::string m = metrics_text(plain.port());
    CHECK_FALSE(contains(m, "ember_neuron_cache"));
    CHECK_FALSE(contains(m, "ember_memory_budget_bytes"));
  }
  MemoryServer s(budget_of(small_budget()));
  CHECK(chat_text(s.port()) == reference_text());
  const std::string m = metrics_text(s.port());
  INFO(m);
  CHECK(sample_value(m, "ember_memory_budget_bytes") == static_cast<double>(small_budget()));
  const double resident = sample_value(m, "ember_memory_resident_bytes");
  CHECK(resident > 0);
  CHECK(resident <= static_cast<double>(small_budget()));
  CHECK(contains(m, "# TYPE ember_neuron_cache_hits_total counter"));
  CHECK(sample_value(m, "ember_neuron_cache_hits_total{kind=\"hot\"}") > 0);
  CHECK(sample_value(m, "ember_neuron_cache_hits_total{kind=\"cold\"}") >= 0);
  CHECK(sample_value(m, "ember_neuron_cache_misses_total") > 0);
  CHECK(sample_value(m, "ember_neuron_cache_evictions_total") >= 0);
  CHECK(sample_value(m, "ember_neuron_cache_reads_total") > 0);
  CHECK(sample_value(m, "ember_neuron_cache_read_bytes_total") > 0);
  CHECK(sample_value(m, "ember_neuron_cache_io_wait_seconds_total") >= 0);
  const double prefetched = sample_value(m, "ember_neuron_cache_prefetched_bundles_total");
  CHECK(prefetched > 0);  // memory.prefetch is on by default
  CHECK(sample_value(m, "ember_neuron_cache_prefetched_used_total") <= prefetched);
  const double rate = sample_value(m, "ember_neuron_cache_hit_rate");
  CHECK(rate > 0);
  CHECK(rate < 1);
  CHECK(contains(m, "# TYPE ember_neuron_cache_read_latency_seconds histogram"));
  CHECK(contains(m, "ember_neuron_cache_read_latency_seconds_bucket{le=\"2e-06\"} "));
  const double count = sample_value(m, "ember_neuron_cache_read_latency_seconds_count");
  CHECK(count > 0);
  CHECK(sample_value(m, "ember_neuron_cache_read_latency_seconds_bucket{le=\"+Inf\"}") == count);
  CHECK(sample_value(m, "ember_neuron_cache_read_latency_seconds_sum") > 0);
  CHECK(sample_value(m, "ember_neuron_cache_replans_total") == 0);
  // Buckets are cumulative: never decreasing.
  double previous = 0;
  size_t pos = 0;
  int buckets = 0;
  while ((pos = m.find("ember_neuron_cache_read_latency_seconds_bucket{", pos)) != std::string::npos) {
    const size_t space = m.find("} ", pos);
    const double v = std::stod(m.substr(space + 2));
    CHECK(v >= previous);
    previous = v;
    ++buckets;
    pos = space;
  }
  CHECK(buckets == static_cast<int>(cache::FetcherStats::kLatencyBuckets));
}

TEST_CASE("memory server: activation counts saved at stop, loaded at the next start, re-planned between jobs") {
  const std::string state = (test_dir() / "state" / "pack.activations").string();
  std::filesystem::remove_all(test_dir() / "state");
  {
    MemoryServer s(budget_of(small_budget(), false, state));
    CHECK(s.logged("no saved activation counts at " + state));
    CHECK(chat_text(s.port()) == reference_text());
    CHECK_FALSE(std::filesystem::exists(state));  // replan_tokens 0: only at stop
    s.stop();
    CHECK(s.logged("activation counts saved to " + state));
  }
  REQUIRE(std::filesystem::exists(state));
  {
    MemoryServer s(budget_of(small_budget(), false, state, 4));
    INFO(s.log_text());
    CHECK(s.logged("activation counts loaded from " + state));
    std::filesystem::remove(state);
    // 10 decoded tokens >= 4: a re-plan after the job, and the counts saved with it.
    CHECK(chat_text(s.port()) == reference_text());
    // The re-plan runs on the engine thread right after the answer went out: wait for it.
    double runs = 0;
    for (int i = 0; i < 500 && runs < 2; ++i) {
      runs = sample_value(metrics_text(s.port()), "ember_neuron_cache_replan_runs_total");
      if (runs < 2) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(runs >= 2);  // one at start (counts loaded) + one after the job
    CHECK(std::filesystem::exists(state));
    // A re-planned cache answers the same.
    CHECK(chat_text(s.port()) == reference_text());
  }
  // A damaged file is only a warning: the daemon starts from the pack's profile.
  std::ofstream(state, std::ios::binary | std::ios::trunc) << "not activation counts";
  {
    MemoryServer s(budget_of(small_budget(), false, state));
    INFO(s.log_text());
    CHECK(s.logged("warning: ignoring the saved activation counts " + state));
    CHECK(chat_text(s.port()) == reference_text());
  }
  // The damaged file was replaced at stop by good counts.
  MemoryServer s(budget_of(small_budget(), false, state));
  CHECK(s.logged("activation counts loaded from " + state));
}

TEST_CASE("memory section: defaults, file keys, variables, bad values") {
  const server::ServeConfig d;
  const auto j = server::to_json(d);
  CHECK(j["memory"]["budget"] == "");
  CHECK(j["memory"]["io_backend"] == "auto");
  CHECK(j["memory"]["activation_state"].is_null());
  CHECK(j["memory"]["replan_tokens"] == 8192);

  server::ServeConfig c;
  server::apply_config_json(c, json::parse(R"({"memory":{"budget":"50%","io_backend":"pread",
      "activation_state":"/var/lib/ember/x.activations","replan_tokens":0}})"), "test");
  CHECK(c.memory_budget == "50%");
  CHECK(c.io_backend == "pread");
  CHECK(c.activation_state == std::optional<std::string>("/var/lib/ember/x.activations"));
  CHECK(c.replan_tokens == 0);
  server::apply_config_json(c, json::parse(R"({"memory":{"activation_state":null,"budget":"1.5G"}})"), "test");
  CHECK_FALSE(c.activation_state.has_value());
  CHECK(c.memory_budget == "1.5G");
  server::apply_config_json(c, json::parse(R"({"memory":{"activation_state":""}})"), "test");
  CHECK(c.activation_state == std::optional<std::string>(""));

  Env env;
  env.vars = {{"EMBER_MEMORY_BUDGET", "512M"}, {"EMBER_IO_BACKEND", "uring"},
              {"EMBER_ACTIVATION_STATE", "/tmp/a.activations"}, {"EMBER_REPLAN_TOKENS", "100"}};
  server::ServeConfig e;
  server::apply_environment(e, env.fn());
  CHECK(e.memory_budget == "512M");
  CHECK(e.io_backend == "uring");
  CHECK(e.activation_state == std::optional<std::string>("/tmp/a.activations"));
  CHECK(e.replan_tokens == 100);

  auto file_error = [](const char* text) {
    return error_of([&] {
      server::ServeConfig x;
      server::apply_config_json(x, json::parse(text), "config file f.json");
    });
  };
  std::string err = file_error(R"({"memory":{"budget":"lots"}})");
  CHECK(contains(err, "config file f.json: memory.budget must be empty (all in RAM), a size"));
  CHECK(contains(err, "\"lots\""));
  CHECK(contains(file_error(R"({"memory":{"budget":"150%"}})"), "memory.budget"));
  CHECK(contains(file_error(R"({"memory":{"budget":"0"}})"), "memory.budget"));
  CHECK(contains(file_error(R"({"memory":{"budget":4096}})"), "memory.budget must be a string"));
  CHECK(contains(file_error(R"({"memory":{"io_backend":"mmap"}})"),
                 "memory.io_backend must be one of auto, uring, pread, got \"mmap\""));
  CHECK(contains(file_error(R"({"memory":{"replan_tokens":-1}})"), "memory.replan_tokens must be an integer from 0"));
  CHECK(contains(file_error(R"({"memory":{"activation_state":3}})"), "memory.activation_state must be a string"));
  CHECK(contains(file_error(R"({"memory":{"budgett":"1G"}})"), "unknown key \"memory.budgett\""));
  CHECK(contains(file_error(R"({"model":{"budget":"1G"}})"), "did you mean \"memory.budget\""));

  Env bad;
  bad.vars = {{"EMBER_REPLAN_TOKENS", "many"}};
  CHECK(contains(error_of([&] {
                   server::ServeConfig x;
                   server::apply_environment(x, bad.fn());
                 }),
                 "environment variable EMBER_REPLAN_TOKENS (memory.replan_tokens) must be an integer"));
  bad.vars = {{"EMBER_MEMORY_BUDGET", "12Q"}};
  CHECK(contains(error_of([&] {
                   server::ServeConfig x;
                   server::apply_environment(x, bad.fn());
                 }),
                 "environment variable EMBER_MEMORY_BUDGET: memory.budget"));
}

TEST_CASE("memory section: where the activation counts are kept") {
  server::ServeConfig c;
  Env env;
  CHECK(server::activation_state_path(c, "/m/pack.gguf", env.fn()) == "");  // nowhere to put it
  env.vars = {{"HOME", "/home/u"}};
  CHECK(server::activation_state_path(c, "/m/pack.gguf", env.fn()) ==
        "/home/u/.local/state/ember/pack.gguf.activations");
  env.vars["XDG_STATE_HOME"] = "/xdg";
  CHECK(server::activation_state_path(c, "models/pack.gguf", env.fn()) == "/xdg/ember/pack.gguf.activations");
  env.vars["STATE_DIRECTORY"] = "/var/lib/ember:/var/lib/other";  // systemd's StateDirectory=
  CHECK(server::activation_state_path(c, "/m/pack.gguf", env.fn()) == "/var/lib/ember/pack.gguf.activations");
  c.activation_state = "/elsewhere/x";
  CHECK(server::activation_state_path(c, "/m/pack.gguf", env.fn()) == "/elsewhere/x");
  c.activation_state = "";
  CHECK(server::activation_state_path(c, "/m/pack.gguf", env.fn()) == "");
}

}  // namespace ember::test_memory
