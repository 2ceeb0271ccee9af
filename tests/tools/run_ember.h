#pragma once
// Runs the built `ember` binary (EMBER_BINARY, defined for test_tools by CMakeLists.txt) the way a
// user's shell would, for the command-line tests: its stdout, its stderr and its exit code.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>

namespace ember::test {

struct EmberRun {
  int exit_code = -1;  // -1: popen failed or ember did not exit normally
  std::string out, err;
};

// The whole file, or "" when it cannot be opened.
inline std::string slurp(const std::string& path) {
  std::string s;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) s.append(buf.data(), n);
    std::fclose(f);
  }
  return s;
}

// Runs `ember ARGS` through the shell. `env` goes before the binary on the command line:
// "NAME=value ..." adds variables, "env -i NAME=value ..." starts from an empty environment.
// stderr goes to a temp file named after this process (the runs are sequential, and test binaries
// running side by side have different ids), read back and removed.
inline EmberRun run_ember(const std::string& args, const std::string& env = "") {
  const std::string err_path = "/tmp/ember-tools-test-" + std::to_string(::getpid()) + ".err";
  const std::string cmd = env + " " + std::string(EMBER_BINARY) + " " + args + " 2>" + err_path;
  EmberRun r;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  r.err = slurp(err_path);
  std::remove(err_path.c_str());
  return r;
}

}  // namespace ember::test
