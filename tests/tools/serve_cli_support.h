#pragma once
// Shared by the `ember serve` command-line tests: run the binary in a clean environment and read
// its --print-config output.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
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
    if (reaped) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;  // already gone: no signal
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 2000; ++i) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  // Whether it is still running (reaps it when it has exited; `status` then holds its status).
  bool running() {
    if (reaped) return false;
    if (::waitpid(pid, &status, WNOHANG) != pid) return true;
    reaped = true;
    return false;
  }
  pid_t pid = -1;
  bool reaped = false;
  int status = 0;
};

// One HTTP/1.0 request to 127.0.0.1:port (the server closes the connection after answering); the
// whole response, or "" when nothing answered.
inline std::string http_request(int port, const std::string& method, const std::string& target,
                                const std::string& body = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return {};
  }
  const std::string req = method + " " + target + " HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\n" +
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  std::string out;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// The TCP port a daemon logged ("listening on http://127.0.0.1:PORT"), 0 when not (yet) there.
inline int logged_port(const std::string& log) {
  const std::string key = "listening on http://127.0.0.1:";
  const size_t at = log.find(key);
  return at == std::string::npos ? 0 : std::atoi(log.c_str() + at + key.size());
}

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
