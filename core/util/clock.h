#pragma once
// The one clock the engine times its steps with: monotonic, in nanoseconds, so that the difference
// of two readings is a duration whatever the wall clock does meanwhile.
#include <chrono>
#include <cstdint>

namespace ember {

inline uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

}  // namespace ember
