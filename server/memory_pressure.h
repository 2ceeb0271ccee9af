#pragma once
// Memory-pressure elasticity: under a memory budget the neuron cache gives memory back while the
// device is short of it and grows back once it is not. The kernel says when (a PSI trigger on
// /proc/pressure/memory, io/psi_trigger.h; and, in a cgroup v2 group with a memory limit, the
// group's own memory.pressure and memory.events, io/cgroup_memory.h); PressureGovernor decides how much (no threads, no
// clock of its own: testable); MemoryPressureWatcher runs the two on a thread and hands the
// budgets to the engine, which rebuilds the cache between steps. The cache only changes speed,
// never results, so a shrink costs tokens/s and nothing else.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace ember::io {
class PressureSources;
}

namespace ember::server {

class EngineWorker;

struct PressurePolicy {
  double shrink_factor = 0.75;   // each pressure event: budget *= this (down to the minimum)
  // After this long without pressure, each further quiet period grows the budget by grow_step of
  // the configured budget, up to it.
  std::chrono::milliseconds calm{std::chrono::seconds(10)};
  double grow_step = 0.25;
};

class PressureGovernor {
 public:
  using Clock = std::chrono::steady_clock;
  // `configured`: the budget to return to; `minimum`: the smallest the cache runs with.
  PressureGovernor(uint64_t configured, uint64_t minimum, PressurePolicy policy = {});

  // The trigger fired at `now`: the lower budget, or nullopt when already at the minimum.
  std::optional<uint64_t> on_pressure(Clock::time_point now);
  // No pressure seen up to `now`: a higher budget once calm has lasted a full period since the
  // last pressure or growth, else nullopt.
  std::optional<uint64_t> on_quiet(Clock::time_point now);
  uint64_t target() const { return target_; }

 private:
  uint64_t configured_, minimum_, target_;
  PressurePolicy policy_;
  Clock::time_point last_change_{};
};

struct PressureWatchOptions {
  std::string path = "/proc/pressure/memory";  // the machine's PSI file
  // The own cgroup v2 group, watched when it has a memory.high or memory.max: its memory.pressure
  // (PSI, needs write access to the file: a delegated group) and memory.events (readable by all).
  // Empty: found from /proc/self; watch_cgroup false: not watched.
  bool watch_cgroup = true;
  std::string cgroup_dir;
  std::chrono::microseconds stall{std::chrono::milliseconds(100)};  // stalled this long ...
  std::chrono::microseconds window{std::chrono::seconds(2)};       // ... within this window
  PressurePolicy policy;
};

class MemoryPressureWatcher {
 public:
  // Starts watching when the engine runs under a memory budget and the trigger can be set;
  // otherwise logs why not and does nothing. `log` gets lines without a trailing newline.
  MemoryPressureWatcher(EngineWorker& engine, PressureWatchOptions options,
                        std::function<void(const std::string&)> log);
  ~MemoryPressureWatcher();  // stop()
  MemoryPressureWatcher(const MemoryPressureWatcher&) = delete;
  MemoryPressureWatcher& operator=(const MemoryPressureWatcher&) = delete;

  bool active() const { return thread_.joinable(); }
  void stop();  // idempotent; returns within one poll period

 private:
  void run(PressureGovernor governor);

  EngineWorker& engine_;
  PressureWatchOptions options_;
  std::unique_ptr<io::PressureSources> sources_;  // set in the constructor, waited on by the thread
  std::function<void(const std::string&)> log_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace ember::server
