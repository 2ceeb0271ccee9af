// Memory-pressure elasticity: the governor's budgets, the PSI trigger, the cgroup v2 signals, and
// the engine shrinking and regrowing a pack's neuron cache with the text unchanged.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <thread>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/cache/budget_planner.h"
#include "core/pack/pack_writer.h"
#include "io/cgroup_memory.h"
#include "io/io_errors.h"
#include "io/pressure_sources.h"
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

// An engine serving a freshly written pack of the drelu test model (predictor mode) under twice
// its minimum budget; `minimum` gets that minimum.
std::unique_ptr<EngineWorker> pack_engine(const std::string& name, int64_t n_ctx, std::function<void(const std::string&)> log,
                                          uint64_t& minimum) {
  pack::PackOptions p;
  p.source_path = test_server::drelu_predictor_model_path();
  p.output_path = (test_server::test_dir() / name).string();
  pack::write_pack(p);
  minimum = test_server::minimum_budget(p.output_path);
  REQUIRE(minimum > 0);
  ModelLoadOptions lo;
  lo.offload.budget_bytes = minimum * 2;
  lo.offload.backend = io::IoBackend::Pread;
  EngineOptions eo;
  eo.threads = 1;
  eo.context.n_ctx = n_ctx;
  eo.context.sparse.mode = SparseOptions::Mode::Predictor;
  eo.log = std::move(log);
  return std::make_unique<EngineWorker>(Model::load(p.output_path, lo), eo);
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::string events_text(uint64_t high, uint64_t max) {
  return "low 0\nhigh " + std::to_string(high) + "\nmax " + std::to_string(max) + "\noom 0\noom_kill 0\n";
}

// A stand-in for a cgroup v2 group's directory: a limit and a memory.events file, no PSI file (as
// for a group that is not delegated, whose memory.pressure the daemon may not write).
std::filesystem::path fake_group(const std::string& name) {
  const auto dir = test_server::test_dir() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  write_file(dir / "memory.max", "max\n");
  write_file(dir / "memory.high", "6442450944\n");
  write_file(dir / "memory.events", events_text(0, 0));
  return dir;
}

}  // namespace

TEST_CASE("cgroup v2: the own group from /proc/self/cgroup and mountinfo; limits; memory.events") {
  CHECK(io::cgroup2_group_from_proc("0::/system.slice/ember.service\n") == "/system.slice/ember.service");
  CHECK(io::cgroup2_group_from_proc("12:memory:/user.slice\n1:name=systemd:/user.slice\n0::/user.slice/a\n") ==
        "/user.slice/a");  // hybrid: the v2 line among v1 ones
  CHECK(!io::cgroup2_group_from_proc("12:memory:/user.slice\n"));  // cgroup v1 only
  CHECK(!io::cgroup2_group_from_proc(""));
  const std::string mountinfo =
      "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
      "30 22 0:26 / /sys/fs/cgroup/unified rw,nosuid,nodev shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
      "31 22 0:27 / /sys/fs/cgroup/memory rw shared:10 - cgroup cgroup rw,memory\n";
  CHECK(io::cgroup2_mount_from_mountinfo(mountinfo) == "/sys/fs/cgroup/unified");
  CHECK(!io::cgroup2_mount_from_mountinfo("31 22 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"));
  CHECK(io::parse_memory_limit("max\n") == std::nullopt);
  CHECK(io::parse_memory_limit("6442450944\n") == 6442450944u);
  CHECK(io::parse_memory_limit("") == std::nullopt);
  const io::MemoryEventCounts c = io::parse_memory_events("low 1\nhigh 22\nmax 3\noom 4\noom_kill 5\noom_group_kill 0\n");
  CHECK(c.low == 1);
  CHECK(c.high == 22);
  CHECK(c.max == 3);
  CHECK(c.oom == 4);
  CHECK(c.oom_kill == 5);
  const auto dir = fake_group("cgroup-limits");
  const io::GroupLimits limits = io::read_group_limits(dir.string());
  CHECK(limits.high == 6442450944u);
  CHECK(!limits.max);
  CHECK(limits.any());
  CHECK(!io::read_group_limits((dir / "absent").string()).any());
  // This machine's own group, whatever it is: found or not, never a throw.
  CHECK_NOTHROW((void)io::own_cgroup2_dir());
}

TEST_CASE("pressure sources: a memory.events change wakes the wait and names the limit that was hit") {
  const auto dir = fake_group("cgroup-events");
  io::PressureSources sources;
  sources.add(std::make_unique<io::MemoryEventsWatch>((dir / "memory.events").string()));
  CHECK(sources.describe().find("memory.events (events)") != std::string::npos);
  CHECK(!sources.wait(50ms));  // nothing changed
  write_file(dir / "memory.events", events_text(1, 0));
  auto why = sources.wait(2000ms);
  REQUIRE(why);
  CHECK(why->find("memory.high reached") != std::string::npos);
  CHECK(!sources.wait(50ms));  // drained
  write_file(dir / "memory.events", events_text(1, 2));
  why = sources.wait(2000ms);
  REQUIRE(why);
  CHECK(why->find("memory.max reached") != std::string::npos);
  CHECK_THROWS_AS(io::MemoryEventsWatch((dir / "absent.events").string()), io::IoError);
}

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
  std::mutex log_mutex;
  std::vector<std::string> lines;
  uint64_t minimum = 0;
  auto engine_ptr = pack_engine("pressure-pack.gguf", 256, [&](const std::string& line) {
    std::lock_guard lock(log_mutex);
    lines.push_back(line);
  }, minimum);
  EngineWorker& engine = *engine_ptr;
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

TEST_CASE("pressure watcher: the own cgroup hitting memory.high shrinks the neuron cache; calm regrows it") {
  uint64_t minimum = 0;
  auto engine_ptr = pack_engine("cgroup-pressure-pack.gguf", 64, [](const std::string&) {}, minimum);
  EngineWorker& engine = *engine_ptr;

  const auto dir = fake_group("cgroup-watcher");
  PressureWatchOptions wo;
  wo.path = (dir / "no-machine-psi").string();  // only the group's signals
  wo.cgroup_dir = dir.string();
  wo.policy.calm = 300ms;
  std::mutex log_mutex;
  std::vector<std::string> lines;
  MemoryPressureWatcher watcher(engine, wo, [&](const std::string& line) {
    std::lock_guard lock(log_mutex);
    lines.push_back(line);
  });
  REQUIRE(watcher.active());
  {
    std::lock_guard lock(log_mutex);
    REQUIRE(!lines.empty());
    CHECK(lines.front().find("memory.events (events)") != std::string::npos);
    CHECK(lines.front().find("no-machine-psi") != std::string::npos);  // said why not watched
  }
  const auto wait_for = [&engine](auto pred) {
    for (int i = 0; i < 200 && !pred(engine.metrics()); ++i) std::this_thread::sleep_for(50ms);
    return pred(engine.metrics());
  };
  write_file(dir / "memory.events", events_text(1, 0));
  CHECK(wait_for([](const EngineMetrics& m) { return m.memory_budget_shrinks >= 1; }));
  CHECK(engine.metrics().memory_budget_bytes < minimum * 2);
  // No more events: after the calm periods the budget is back where it was configured.
  CHECK(wait_for([&](const EngineMetrics& m) { return m.memory_budget_bytes == minimum * 2; }));
  CHECK(engine.metrics().memory_budget_regrowths >= 1);
  watcher.stop();
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
