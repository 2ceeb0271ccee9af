#pragma once
// Shared by the `ember serve` command-line tests: run the binary in a clean environment and read
// its --print-config output.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/tools/run_ember.h"

namespace ember::test {

// Runs `ember serve ARGS` in an empty environment plus `env` ("NAME=value ..."), so variables of
// the caller's shell (EMBER_CONFIG, EMBER_PORT, ...) cannot leak into the result.
inline EmberRun serve(const std::string& env, const std::string& args) {
  return run_ember("serve " + args, "env -i " + env);
}

// The merged configuration `ember serve --print-config ARGS` prints (the run must succeed).
inline nlohmann::json print_config(const std::string& env, const std::string& args) {
  const EmberRun r = serve(env, "--print-config " + args);
  INFO("stderr: ", r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

// `ember ARGS...` in the background with stderr to a file; the destructor kills it if still running.
struct Daemon {
  Daemon(const std::vector<std::string>& args, const std::string& err_path) {
    pid = ::fork();
    if (pid == 0) {
      FILE* err = std::freopen(err_path.c_str(), "w", stderr);
      (void)err;
      std::vector<char*> argv{const_cast<char*>(EMBER_BINARY)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(EMBER_BINARY, argv.data());
      std::_Exit(127);
    }
  }
  ~Daemon() {
    if (pid > 0 && !reaped) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  // SIGTERM, then the exit code (-1 when it did not exit normally within 20 s).
  int terminate() {
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 2000; ++i) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  pid_t pid = -1;
  bool reaped = false;
};

// Waits up to 20 s for `text` to appear in the file; returns the file's text.
inline std::string wait_for_text(const std::string& path, const std::string& text) {
  std::string s;
  for (int i = 0; i < 2000; ++i) {
    s = slurp(path);
    if (s.find(text) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return s;
}

}  // namespace ember::test
