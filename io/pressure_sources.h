#pragma once
// Every memory-pressure signal the daemon watches, waited on together: PSI triggers (the machine's
// /proc/pressure/memory, the own cgroup's memory.pressure) and memory.events watches (the own
// cgroup hitting memory.high or memory.max). io/cgroup_memory.h says why a service needs both.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/cgroup_memory.h"
#include "io/psi_trigger.h"

namespace ember::io {

class PressureSources {
 public:
  void add(std::unique_ptr<PressureTrigger> trigger);
  void add(std::unique_ptr<MemoryEventsWatch> events);
  bool empty() const { return triggers_.empty() && events_.empty(); }
  // "PATH (PSI), PATH (events)", for the startup log.
  std::string describe() const;
  // Waits up to `timeout` (EINTR counts as a timeout): why pressure was signalled ("stall on
  // PATH", "memory.high reached (PATH)"), or nullopt. Throws IoError when a source failed (its
  // cgroup went away).
  std::optional<std::string> wait(std::chrono::milliseconds timeout);

 private:
  std::vector<std::unique_ptr<PressureTrigger>> triggers_;
  std::vector<std::unique_ptr<MemoryEventsWatch>> events_;
};

}  // namespace ember::io
