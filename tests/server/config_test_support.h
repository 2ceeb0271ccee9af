#pragma once
// Shared by the `ember serve` configuration tests: a fake environment for apply_environment and
// small helpers for checking error messages.
#include <map>
#include <stdexcept>
#include <string>

#include "server/serve_config.h"

namespace ember::server::test {

// A fake environment: the variables a test sets, nothing else.
struct Env {
  std::map<std::string, std::string> vars;
  GetEnv fn() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

// The message of the runtime_error `f` throws ("" when it does not throw).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace ember::server::test
