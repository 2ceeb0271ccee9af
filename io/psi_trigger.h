#pragma once
// Linux pressure stall information (PSI, the kernel's Documentation/accounting/psi.rst): a trigger
// on /proc/pressure/memory (or a cgroup v2 group's memory.pressure) makes the kernel wake a poll()
// with POLLPRI when tasks were stalled on memory for at least `stall` within a `window`. This is
// how a daemon learns that the device needs memory back before the OOM killer acts: Android's
// low-memory killer daemon watches the same signal.
#include <chrono>
#include <string>

namespace ember::io {

class PressureTrigger {
 public:
  // Opens `path` and writes the trigger "some <stall us> <window us>" (some: at least one task
  // stalled). The kernel wants the window within [500 ms, 10 s] (a multiple of 2 s for processes
  // without CAP_SYS_RESOURCE) and the stall within it. Throws IoError naming the path: no PSI
  // (kernel without CONFIG_PSI or booted with psi=0), no permission, a bad window.
  PressureTrigger(const std::string& path, std::chrono::microseconds stall, std::chrono::microseconds window);
  ~PressureTrigger();
  PressureTrigger(const PressureTrigger&) = delete;
  PressureTrigger& operator=(const PressureTrigger&) = delete;

  // Waits up to `timeout` for the trigger: true when it fired. EINTR counts as a timeout. Throws
  // IoError when the file reports an error (the cgroup went away).
  bool wait(std::chrono::milliseconds timeout);
  const std::string& path() const { return path_; }
  // For a poll() over several sources (PressureSources): POLLPRI is the trigger, POLLERR an error.
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace ember::io
