#include "io/pressure_sources.h"

#include <poll.h>

#include <cerrno>

#include "io/io_errors.h"

namespace ember::io {

void PressureSources::add(std::unique_ptr<PressureTrigger> trigger) { triggers_.push_back(std::move(trigger)); }

void PressureSources::add(std::unique_ptr<MemoryEventsWatch> events) { events_.push_back(std::move(events)); }

std::string PressureSources::describe() const {
  std::string out;
  for (const auto& t : triggers_) out += (out.empty() ? "" : ", ") + t->path() + " (PSI)";
  for (const auto& e : events_) out += (out.empty() ? "" : ", ") + e->path() + " (events)";
  return out;
}

std::optional<std::string> PressureSources::wait(std::chrono::milliseconds timeout) {
  // Triggers first, then the events watches, in the order added; at most a handful, so the
  // vector is small (and this thread is no hot path).
  std::vector<pollfd> fds;
  fds.reserve(triggers_.size() + events_.size());
  for (const auto& t : triggers_) fds.push_back({t->fd(), POLLPRI, 0});
  for (const auto& e : events_) fds.push_back({e->fd(), POLLIN, 0});
  const int n = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  if (n < 0) {
    if (errno == EINTR) return std::nullopt;
    throw_io_error(describe(), "poll on the memory pressure sources failed", errno);
  }
  if (n == 0) return std::nullopt;
  std::optional<std::string> why;
  for (size_t i = 0; i < triggers_.size(); ++i) {
    if ((fds[i].revents & POLLERR) != 0) {
      throw_io_error(triggers_[i]->path(), "the pressure trigger reported an error", 0);
    }
    if (!why && (fds[i].revents & POLLPRI) != 0) why = "stall on " + triggers_[i]->path();
  }
  for (size_t i = 0; i < events_.size(); ++i) {
    if ((fds[triggers_.size() + i].revents & POLLIN) == 0) continue;
    // Always drained, even when a trigger already explains this wake-up: the counters move on.
    auto hit = events_[i]->changed();
    if (!why && hit) why = *hit + " (" + events_[i]->path() + ")";
  }
  return why;
}

}  // namespace ember::io
