// Memory-pressure elasticity: the governor's budgets, the PSI trigger, and the engine shrinking
// and regrowing a pack's neuron cache with the text unchanged.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/cache/budget_planner.h"
#include "core/pack/pack_writer.h"
#include "io/io_errors.h"
#include "io/psi_trigger.h"
#include "server/engine_worker.h"
#include "server/memory_pressure.h"
#include "tests/server/tiny_model.h"

namespace ember::server {
namespace {

using namespace std::chrono_literals;
using Clock = PressureGovernor::Clock;

std::string greedy(EngineWorker& engine, const std::string& prompt) {
  std::string text;
  std::promise<std::exception_ptr> done;
  GenerationJob job;
  job.prompt = engine.model().tokenizer().encode(prompt, true, false);
  job.sampling.temperature = 0.0f;
  job.max_tokens = 12;
  job.on_text = [&text](std::string_view t) { text += t; };
  job.on_done = [&done](const GenerationStats&, std::exception_ptr e) { done.set_value(e); };
  auto result = done.get_future();
  REQUIRE(engine.try_submit(std::move(job)));
  REQUIRE(result.wait_for(60s) == std::future_status::ready);
  REQUIRE(!result.get());
  return text;
}

}  // namespace

TEST_CASE("pressure governor: shrinks by a quarter per event down to the minimum, regrows after calm periods") {
  PressurePolicy policy;
  policy.calm = 10s;
  PressureGovernor g(1000, 300, policy);
  const Clock::time_point t0{};
  CHECK(g.target() == 1000);
  CHECK(!g.on_quiet(t0 + 60s));  // at the configured budget: nothing to regrow
  CHECK(g.on_pressure(t0 + 61s) == 750u);
  CHECK(g.on_pressure(t0 + 62s) == 562u);
  CHECK(g.on_pressure(t0 + 63s) == 421u);
  CHECK(g.on_pressure(t0 + 64s) == 315u);
  CHECK(g.on_pressure(t0 + 65s) == 300u);  // the minimum
  CHECK(!g.on_pressure(t0 + 66s));         // already there
  CHECK(!g.on_quiet(t0 + 75s));            // calm for 9 s only: pressure at 66 s restarted it
  CHECK(g.on_quiet(t0 + 76s) == 550u);     // + a quarter of the configured budget
  CHECK(!g.on_quiet(t0 + 80s));
  CHECK(g.on_quiet(t0 + 86s) == 800u);
  CHECK(g.on_pressure(t0 + 87s) == 600u);
  CHECK(g.on_quiet(t0 + 97s) == 850u);
  CHECK(g.on_quiet(t0 + 107s) == 1000u);  // capped at the configured budget
  CHECK(!g.on_quiet(t0 + 200s));
  // A configured budget under the minimum runs at the minimum.
  CHECK(PressureGovernor(100, 300).target() == 300);
}

TEST_CASE("PSI trigger: set on /proc/pressure/memory where the kernel has PSI; a bad path is an IoError naming it") {
  CHECK_THROWS_AS(io::PressureTrigger("/nonexistent/pressure/memory", 100ms, 2s), io::IoError);
  try {
    io::PressureTrigger("/nonexistent/pressure/memory", 100ms, 2s);
  } catch (const io::IoError& e) {
    CHECK(std::string(e.what()).find("/nonexistent/pressure/memory") != std::string::npos);
  }
  std::unique_ptr<io::PressureTrigger> trigger;
  try {
    trigger = std::make_unique<io::PressureTrigger>("/proc/pressure/memory", 100ms, 2s);
  } catch (const io::IoError& e) {
    MESSAGE("SKIPPED: the PSI trigger part (" << e.what() << ")");
    return;
  }
  // A window outside the kernel's [500 ms, 10 s] is refused by the kernel, by name.
  CHECK_THROWS_AS(io::PressureTrigger("/proc/pressure/memory", 100ms, 60s), io::IoError);
  // Whether it fires depends on the machine; it must return within the timeout either way.
  const auto t0 = Clock::now();
  (void)trigger->wait(50ms);
  CHECK(Clock::now() - t0 < 5s);
}

TEST_CASE("engine: the neuron cache shrinks to its minimum and grows back; the greedy text never changes") {
  pack::PackOptions p;
  p.source_path = test_server::drelu_predictor_model_path();
  p.output_path = (test_server::test_dir() / "pressure-pack.gguf").string();
  pack::write_pack(p);
  const uint64_t minimum = test_server::minimum_budget(p.output_path);
  REQUIRE(minimum > 0);
  ModelLoadOptions lo;
  lo.offload.budget_bytes = minimum * 2;
  lo.offload.backend = io::IoBackend::Pread;
  EngineOptions eo;
  eo.threads = 1;
  eo.context.n_ctx = 256;
  eo.context.sparse.mode = SparseOptions::Mode::Predictor;
  std::mutex log_mutex;
  std::vector<std::string> lines;
  eo.log = [&](const std::string& line) {
    std::lock_guard lock(log_mutex);
    lines.push_back(line);
  };
  EngineWorker engine(Model::load(p.output_path, lo), eo);
  CHECK(engine.configured_cache_budget() == minimum * 2);
  CHECK(engine.minimum_cache_budget() == minimum);
  const std::string prompt = "the quick brown fox jumps over the lazy dog";
  const std::string want = greedy(engine, prompt);
  REQUIRE(!want.empty());

  engine.request_cache_budget(1, "test: shrink");  // under the minimum: the minimum
  CHECK(greedy(engine, prompt) == want);
  EngineMetrics m = engine.metrics();
  CHECK(m.memory_budget_bytes == minimum);
  CHECK(m.memory_configured_budget_bytes == minimum * 2);
  CHECK(m.memory_budget_shrinks == 1);
  CHECK(m.memory_resident_bytes <= minimum);
  engine.model().offloaded_ffn()->check_consistency();

  engine.request_cache_budget(0, "test: regrow");  // 0: the configured budget
  CHECK(greedy(engine, prompt) == want);
  m = engine.metrics();
  CHECK(m.memory_budget_bytes == minimum * 2);
  CHECK(m.memory_budget_regrowths == 1);
  CHECK(m.memory_resize_failures == 0);
  engine.model().offloaded_ffn()->check_consistency();

  std::lock_guard lock(log_mutex);
  bool logged = false;
  for (const std::string& line : lines) logged |= line.find("(test: shrink)") != std::string::npos;
  CHECK(logged);
}

TEST_CASE("pressure watcher: idle without a memory budget") {
  EngineOptions eo;
  eo.threads = 1;
  eo.context.n_ctx = 64;
  EngineWorker engine(Model::load(test_server::tiny_model_path()), eo);
  CHECK(engine.configured_cache_budget() == 0);
  MemoryPressureWatcher watcher(engine, {}, [](const std::string&) {});
  CHECK(!watcher.active());
  engine.request_cache_budget(1, "ignored");  // no cache: a no-op
  CHECK(engine.metrics().memory_budget_shrinks == 0);
}

}  // namespace ember::server
