#pragma once
// The process's own cgroup v2 group, and the memory signals it gives. A service is usually capped
// by its group, not by the machine (systemd's MemoryHigh=/MemoryMax=, deploy/systemd/ember.service;
// a container's limit): the machine-wide /proc/pressure/memory may stay calm while the group is
// reclaimed at its memory.high. Two signals say so: the group's own memory.pressure (a PSI file
// like /proc/pressure/memory, io/psi_trigger.h) and memory.events, whose "high" and "max" counters
// grow each time the group hits those limits (the kernel signals a change of the file to inotify).
// cgroup v1 has neither: there only the machine-wide PSI is watched.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::io {

// The group of a /proc/self/cgroup text: the path of its "0::PATH" line (cgroup v2; a hybrid system
// lists it beside the v1 lines), or nullopt when there is none.
std::optional<std::string> cgroup2_group_from_proc(std::string_view proc_self_cgroup);
// Where cgroup2 is mounted, from a /proc/self/mountinfo text (the first "- cgroup2" line), or nullopt.
std::optional<std::string> cgroup2_mount_from_mountinfo(std::string_view mountinfo);
// The directory of this process's cgroup v2 group (mount + group), or nullopt (cgroup v1 only, no
// /proc, or the directory is absent).
std::optional<std::string> own_cgroup2_dir();

struct MemoryEventCounts {
  uint64_t low = 0, high = 0, max = 0, oom = 0, oom_kill = 0;
};
// Parses memory.events ("high 3\nmax 0\n..."); unknown keys are ignored (newer kernels add some).
MemoryEventCounts parse_memory_events(std::string_view text);
// A memory.high / memory.max value: bytes, or nullopt for "max" (no limit) and anything unreadable.
std::optional<uint64_t> parse_memory_limit(std::string_view text);
// DIR/memory.high and DIR/memory.max, nullopt each where unlimited or unreadable.
struct GroupLimits {
  std::optional<uint64_t> high, max;
  bool any() const { return high || max; }
};
GroupLimits read_group_limits(const std::string& dir);

// Watches a memory.events file: fd() becomes readable (inotify) when the file changes; changed()
// then re-reads it and says which limit was hit since the last look.
class MemoryEventsWatch {
 public:
  explicit MemoryEventsWatch(std::string path);  // throws IoError naming the path
  ~MemoryEventsWatch();
  MemoryEventsWatch(const MemoryEventsWatch&) = delete;
  MemoryEventsWatch& operator=(const MemoryEventsWatch&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Drains the notification and re-reads the counters: "memory.high reached" (or max / oom) when
  // one of them grew, else nullopt (another counter, such as low, changed).
  std::optional<std::string> changed();

 private:
  int fd_ = -1;
  std::string path_;
  MemoryEventCounts last_;
};

}  // namespace ember::io
