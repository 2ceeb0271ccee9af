#include "server/memory_pressure.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>

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
  try {
    // Set here, so a missing PSI is reported at startup.
    trigger_ = std::make_unique<io::PressureTrigger>(options_.path, options_.stall, options_.window);
  } catch (const std::exception& e) {
    log_(std::string("memory pressure is not watched (the cache keeps its budget): ") + e.what());
    return;
  }
  log_("watching memory pressure (" + options_.path + ": " + std::to_string(options_.stall.count() / 1000) +
       " ms stalled within " + std::to_string(options_.window.count() / 1000) +
       " ms): the neuron cache shrinks toward " + mib(engine_.minimum_cache_budget()) + " under pressure");
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
      const bool fired = trigger_->wait(kPollPeriod);
      const auto now = PressureGovernor::Clock::now();
      if (fired) {
        if (auto lower = governor.on_pressure(now)) engine_.request_cache_budget(*lower, "memory pressure");
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
