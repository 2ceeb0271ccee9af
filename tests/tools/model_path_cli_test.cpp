// A model path that is not a regular file, and a daemon told to stop while it loads: `ember run`,
// `ember tokenize` and `ember serve` on a FIFO fail at once naming the path (opening a FIFO for
// reading blocks until a writer comes, so a plain open would hang `run` and make `serve` deaf to
// SIGTERM), and
// SIGTERM during a (deliberately slow) load ends `ember serve` promptly with status 0.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/support/fixtures.h"
#include "tests/support/scratch_dir.h"
#include "tests/tools/serve_cli_support.h"

namespace {

using Run = ember::test::EmberRun;
using ember::test::Daemon;
using ember::test::run_ember;
using ember::test::slurp;
using ember::test::wait_for_text;

const std::filesystem::path& work_dir() { return ember::test::scratch_dir("ember-model-path-cli"); }

// A FIFO nobody writes to.
const std::string& fifo_path() {
  static const std::string path = [] {
    const std::string p = (work_dir() / "model.fifo").string();
    std::filesystem::remove(p);
    REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
    return p;
  }();
  return path;
}

void check_refused_quickly(const Run& r, double seconds) {
  INFO("stderr: ", r.err);
  CHECK(r.exit_code != 0);
  CHECK(r.exit_code != 137);  // `timeout` killed it: it was blocked
  CHECK(seconds < 10.0);
  CHECK(r.err.find("ember: error: ") != std::string::npos);
  CHECK(r.err.find(fifo_path()) != std::string::npos);
  CHECK(r.err.find("not a regular file") != std::string::npos);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("a FIFO as the model: run, tokenize and serve fail at once with 'not a regular file'") {
  // `timeout` turns a regression (blocked forever) into a failure instead of a hung test.
  for (const std::string& args : {"run -m " + fifo_path() + " -p hi -n 1", "tokenize -m " + fifo_path() + " hi",
                                  "serve -m " + fifo_path() + " --port 0"}) {
    INFO(args);
    const auto t0 = std::chrono::steady_clock::now();
    const Run r = run_ember(args, "env -i timeout -s KILL 30");
    check_refused_quickly(r, seconds_since(t0));
  }
  // A pack given as a FIFO under a budget goes through the same open.
  const auto t0 = std::chrono::steady_clock::now();
  const Run r = run_ember("run -m " + fifo_path() + " -p hi -n 1 --memory-budget 1G", "env -i timeout -s KILL 30");
  check_refused_quickly(r, seconds_since(t0));
}

TEST_CASE("ember serve stops promptly, with status 0, when SIGTERM arrives while the model loads" *
          ember::test::needs_fixtures) {
  auto model = ember::test::fixture("models/stories260K.gguf");
  if (!model) return;
  const std::string log_path = (work_dir() / "slow-load.log").string();
  // EMBER_TEST_LOAD_DELAY_MS: every load checkpoint (each tensor) waits 200 ms, so the load of
  // this tiny model takes seconds: long enough to be interrupted deterministically.
  ::setenv("EMBER_TEST_LOAD_DELAY_MS", "200", 1);
  Daemon d({"serve", "-m", model->string(), "--port", "0", "--threads", "1"}, log_path);
  ::unsetenv("EMBER_TEST_LOAD_DELAY_MS");
  const std::string log = wait_for_text(log_path, "ember: loading model");
  REQUIRE(log.find("ember: loading model") != std::string::npos);
  // The server answers while it loads.
  const int port = ember::test::logged_port(log);
  REQUIRE(port > 0);
  CHECK(ember::test::http_request(port, "GET", "/health").find(" 503 ") != std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // well into the load
  REQUIRE(d.running());
  const auto t0 = std::chrono::steady_clock::now();
  const int code = d.terminate();
  const double took = seconds_since(t0);
  const std::string all = slurp(log_path);
  INFO(all);
  CHECK(code == 0);
  CHECK(took < 3.0);  // one checkpoint's delay, not the rest of the load
  CHECK(all.find("interrupted while loading the model") != std::string::npos);
  CHECK(all.find("ember: ready") == std::string::npos);
}
