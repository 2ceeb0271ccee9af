#include "io/cgroup_memory.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>

#include "io/io_errors.h"

namespace ember::io {

namespace {

std::optional<std::string> read_small_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

std::optional<uint64_t> parse_u64(std::string_view s) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Calls fn(line) for each line of text.
template <class Fn>
void for_each_line(std::string_view text, Fn fn) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    fn(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

}  // namespace

std::optional<std::string> cgroup2_group_from_proc(std::string_view proc_self_cgroup) {
  std::optional<std::string> out;
  for_each_line(proc_self_cgroup, [&](std::string_view line) {
    if (!out && line.substr(0, 3) == "0::") out = std::string(trim(line.substr(3)));
  });
  return out;
}

std::optional<std::string> cgroup2_mount_from_mountinfo(std::string_view mountinfo) {
  // "36 25 0:30 / /sys/fs/cgroup rw,nosuid,... shared:9 - cgroup2 cgroup2 rw,...": the mount point
  // is the fifth field; the filesystem type follows the " - " separator.
  std::optional<std::string> out;
  for_each_line(mountinfo, [&](std::string_view line) {
    if (out) return;
    const size_t sep = line.find(" - ");
    if (sep == std::string_view::npos || line.substr(sep + 3, 8) != "cgroup2 ") return;
    std::string_view rest = line.substr(0, sep);
    for (int field = 0; field < 4; ++field) {
      const size_t sp = rest.find(' ');
      if (sp == std::string_view::npos) return;
      rest.remove_prefix(sp + 1);
    }
    out = std::string(rest.substr(0, rest.find(' ')));
  });
  return out;
}

std::optional<std::string> own_cgroup2_dir() {
  const auto cgroup = read_small_file("/proc/self/cgroup");
  const auto mountinfo = read_small_file("/proc/self/mountinfo");
  if (!cgroup || !mountinfo) return std::nullopt;
  const auto group = cgroup2_group_from_proc(*cgroup);
  const auto mount = cgroup2_mount_from_mountinfo(*mountinfo);
  if (!group || !mount) return std::nullopt;
  std::string dir = *mount + (*group == "/" ? "" : *group);
  if (::access(dir.c_str(), R_OK) != 0) return std::nullopt;
  return dir;
}

MemoryEventCounts parse_memory_events(std::string_view text) {
  MemoryEventCounts c;
  for_each_line(text, [&](std::string_view line) {
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos) return;
    const std::string_view key = line.substr(0, sp);
    const uint64_t value = parse_u64(trim(line.substr(sp + 1))).value_or(0);
    if (key == "low") c.low = value;
    else if (key == "high") c.high = value;
    else if (key == "max") c.max = value;
    else if (key == "oom") c.oom = value;
    else if (key == "oom_kill") c.oom_kill = value;
  });
  return c;
}

std::optional<uint64_t> parse_memory_limit(std::string_view text) { return parse_u64(trim(text)); }

GroupLimits read_group_limits(const std::string& dir) {
  GroupLimits l;
  if (const auto t = read_small_file(dir + "/memory.high")) l.high = parse_memory_limit(*t);
  if (const auto t = read_small_file(dir + "/memory.max")) l.max = parse_memory_limit(*t);
  return l;
}

MemoryEventsWatch::MemoryEventsWatch(std::string path) : path_(std::move(path)) {
  const auto text = read_small_file(path_);
  if (!text) throw_io_error(path_, "cannot read the memory events file", errno);
  last_ = parse_memory_events(*text);
  fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) throw_io_error(path_, "cannot create an inotify instance", errno);
  if (::inotify_add_watch(fd_, path_.c_str(), IN_MODIFY) < 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw_io_error(path_, "cannot watch the memory events file", err);
  }
}

MemoryEventsWatch::~MemoryEventsWatch() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<std::string> MemoryEventsWatch::changed() {
  alignas(inotify_event) char buf[4096];
  while (::read(fd_, buf, sizeof buf) > 0) {
  }
  const auto text = read_small_file(path_);
  if (!text) throw_io_error(path_, "cannot read the memory events file", errno);
  const MemoryEventCounts now = parse_memory_events(*text);
  std::optional<std::string> what;
  if (now.oom > last_.oom || now.oom_kill > last_.oom_kill) what = "memory.max reached, OOM";
  else if (now.max > last_.max) what = "memory.max reached";
  else if (now.high > last_.high) what = "memory.high reached";
  last_ = now;
  return what;
}

}  // namespace ember::io
