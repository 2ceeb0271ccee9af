#include "io/psi_trigger.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "io/io_errors.h"

namespace ember::io {

PressureTrigger::PressureTrigger(const std::string& path, std::chrono::microseconds stall,
                                 std::chrono::microseconds window)
    : path_(path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw_io_error(path, "cannot open the pressure file", errno);
  // The trigger is the whole write, with its terminating NUL (the kernel parses a string).
  const std::string trigger =
      "some " + std::to_string(stall.count()) + " " + std::to_string(window.count());
  if (::write(fd_, trigger.c_str(), trigger.size() + 1) < 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw_io_error(path, "cannot set the trigger \"" + trigger + "\"", err);
  }
}

PressureTrigger::~PressureTrigger() {
  if (fd_ >= 0) ::close(fd_);
}

bool PressureTrigger::wait(std::chrono::milliseconds timeout) {
  pollfd p{fd_, POLLPRI, 0};
  const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (n < 0) {
    if (errno == EINTR) return false;
    throw_io_error(path_, "poll on the pressure trigger failed", errno);
  }
  if (n == 0) return false;
  if ((p.revents & POLLERR) != 0) throw_io_error(path_, "the pressure trigger reported an error", 0);
  return (p.revents & POLLPRI) != 0;
}

}  // namespace ember::io
