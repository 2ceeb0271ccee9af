#include "server/memory_pressure.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>

#include "io/cgroup_memory.h"
#include "io/pressure_sources.h"
#include "io/psi_trigger.h"
#include "server/engine_worker.h"

namespace ember::server {

namespace {
// How often the watcher looks at the clock (quiet periods, stop()) when the trigger stays silent.
constexpr std::chrono::milliseconds kPollPeriod{500};

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1u << 19)) >> 20) + " MiB"; }
}  // namespace

PressureGovernor::PressureGovernor(uint64_t configured, uint64_t minimum, PressurePolicy policy)
    : configured_(std::max(configured, minimum)), minimum_(minimum), target_(configured_), policy_(policy) {}

std::optional<uint64_t> PressureGovernor::on_pressure(Clock::time_point now) {
  last_change_ = now;  // pressure restarts the calm period even at the minimum
  const auto lower = static_cast<uint64_t>(std::floor(static_cast<double>(target_) * policy_.shrink_factor));
  const uint64_t next = std::max(minimum_, lower);
  if (next == target_) return std::nullopt;
  target_ = next;
  return target_;
}

std::optional<uint64_t> PressureGovernor::on_quiet(Clock::time_point now) {
  if (target_ == configured_ || now - last_change_ < policy_.calm) return std::nullopt;
  last_change_ = now;
  const auto step = static_cast<uint64_t>(std::ceil(static_cast<double>(configured_) * policy_.grow_step));
  target_ = std::min(configured_, target_ + std::max<uint64_t>(step, 1));
  return target_;
}

MemoryPressureWatcher::MemoryPressureWatcher(EngineWorker& engine, PressureWatchOptions options,
                                             std::function<void(const std::string&)> log)
    : engine_(engine), options_(std::move(options)), log_(std::move(log)) {
  const uint64_t configured = engine_.configured_cache_budget();
  if (configured == 0) return;  // no memory budget: nothing to give back
  // Set here, so a missing source is reported at startup.
  sources_ = std::make_unique<io::PressureSources>();
  std::string not_watched;
  const auto note = [&not_watched](const std::exception& e) {
    not_watched += (not_watched.empty() ? "" : "; ") + std::string(e.what());
  };
  try {
    sources_->add(std::make_unique<io::PressureTrigger>(options_.path, options_.stall, options_.window));
  } catch (const std::exception& e) {
    note(e);
  }
  if (options_.watch_cgroup) {
    const std::optional<std::string> dir =
        options_.cgroup_dir.empty() ? io::own_cgroup2_dir() : std::optional<std::string>(options_.cgroup_dir);
    // A group without a limit is reclaimed only when the machine is, which the machine's PSI shows.
    if (dir && io::read_group_limits(*dir).any()) {
      try {
        sources_->add(std::make_unique<io::PressureTrigger>(*dir + "/memory.pressure", options_.stall, options_.window));
      } catch (const std::exception& e) {
        note(e);
      }
      try {
        sources_->add(std::make_unique<io::MemoryEventsWatch>(*dir + "/memory.events"));
      } catch (const std::exception& e) {
        note(e);
      }
    }
  }
  if (sources_->empty()) {
    log_("memory pressure is not watched (the cache keeps its budget): " + not_watched);
    return;
  }
  log_("watching memory pressure (" + sources_->describe() + "; PSI: " + std::to_string(options_.stall.count() / 1000) +
       " ms stalled within " + std::to_string(options_.window.count() / 1000) +
       " ms): the neuron cache shrinks toward " + mib(engine_.minimum_cache_budget()) + " under pressure" +
       (not_watched.empty() ? "" : " (not watched: " + not_watched + ")"));
  thread_ = std::thread([this, g = PressureGovernor(configured, engine_.minimum_cache_budget(), options_.policy)] {
    run(g);
  });
}

MemoryPressureWatcher::~MemoryPressureWatcher() { stop(); }

void MemoryPressureWatcher::stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
}

void MemoryPressureWatcher::run(PressureGovernor governor) {
  try {
    while (!stopping_.load()) {
      const std::optional<std::string> why = sources_->wait(kPollPeriod);
      const auto now = PressureGovernor::Clock::now();
      if (why) {
        if (auto lower = governor.on_pressure(now)) engine_.request_cache_budget(*lower, "memory pressure: " + *why);
      } else if (auto higher = governor.on_quiet(now)) {
        engine_.request_cache_budget(*higher, "memory pressure over");
      }
    }
  } catch (const std::exception& e) {
    // The pressure file went away (a cgroup removed) or poll failed: give the budget back to its
    // configured size rather than leave the cache small for good.
    log_(std::string("memory pressure watch ended: ") + e.what());
    engine_.request_cache_budget(0, "memory pressure watch ended");
  }
}

}  // namespace ember::server
