#pragma once
// Wall-clock seconds since the Unix epoch: the "created" field of models and completions.
#include <chrono>
#include <cstdint>

namespace ember::server {

inline int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace ember::server
