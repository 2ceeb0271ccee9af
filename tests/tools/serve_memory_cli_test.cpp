// `ember serve`'s memory-budget settings from the outside: --memory-budget, --io-backend,
// --activation-state, --replan-tokens and their EMBER_* variables through --print-config, bad
// values and a budget the model cannot take refused with one line, and a daemon on a pack that
// saves its activation counts on SIGTERM and loads them at the next start.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/scratch_dir.h"
#include "tests/tools/serve_cli_support.h"

namespace {

using nlohmann::json;
using Run = ember::test::EmberRun;

using ember::test::Daemon;
using ember::test::print_config;
using ember::test::run_ember;
using ember::test::serve;
using ember::test::slurp;
using ember::test::wait_for_text;

void check_one_line_error(const Run& r, const std::string& must_mention) {
  INFO("stderr: ", r.err);
  CHECK(r.exit_code != 0);
  CHECK(r.out.empty());
  const size_t line = r.err.find("ember: error: ");
  REQUIRE(line != std::string::npos);
  const std::string error_line = r.err.substr(line);
  CHECK(std::count(error_line.begin(), error_line.end(), '\n') == 1);
  CHECK(error_line.find(must_mention) != std::string::npos);
}

const std::filesystem::path& work_dir() { return ember::test::scratch_dir("ember-serve-memory-cli"); }

// A tiny dReLU model with predictors and its pack (made once).
const std::string& plain_model() {
  static const std::string path = [] {
    const std::string p = (work_dir() / "src.gguf").string();
    REQUIRE(run_ember("synth --preset tiny --type Q8_0 --activation drelu --predictor -q --threads 1 -o " + p)
                .exit_code == 0);
    return p;
  }();
  return path;
}

const std::string& pack_model() {
  static const std::string path = [] {
    const std::string p = (work_dir() / "pack.gguf").string();
    REQUIRE(run_ember("pack -m " + plain_model() + " -o " + p).exit_code == 0);
    return p;
  }();
  return path;
}

}  // namespace

TEST_CASE("ember serve: memory flags and variables in --print-config") {
  json j = print_config("", "");
  CHECK(j["memory"]["budget"] == "");
  CHECK(j["memory"]["io_backend"] == "auto");
  CHECK(j["memory"]["prefetch"] == "auto");
  CHECK(j["memory"]["activation_state"].is_null());
  CHECK(j["memory"]["replan_tokens"] == 8192);

  j = print_config(
      "EMBER_MEMORY_BUDGET=2G EMBER_IO_BACKEND=pread EMBER_ACTIVATION_STATE=/s/a EMBER_REPLAN_TOKENS=5 EMBER_PREFETCH=false",
      "");
  CHECK(j["memory"]["budget"] == "2G");
  CHECK(j["memory"]["prefetch"] == false);
  CHECK(j["memory"]["io_backend"] == "pread");
  CHECK(j["memory"]["activation_state"] == "/s/a");
  CHECK(j["memory"]["replan_tokens"] == 5);
  // Flags beat the environment; --activation-state "" turns the file off.
  j = print_config("EMBER_MEMORY_BUDGET=2G EMBER_ACTIVATION_STATE=/s/a",
                   "--memory-budget 50% --io-backend uring --activation-state '' --replan-tokens 0 --no-prefetch");
  CHECK(j["memory"]["budget"] == "50%");
  CHECK(j["memory"]["prefetch"] == false);
  CHECK(j["memory"]["io_backend"] == "uring");
  CHECK(j["memory"]["activation_state"] == "");
  CHECK(j["memory"]["replan_tokens"] == 0);
  // --prefetch forces it on (a mixture of experts defaults to off); EMBER_PREFETCH=auto is the default.
  CHECK(print_config("EMBER_PREFETCH=false", "--prefetch")["memory"]["prefetch"] == true);
  CHECK(print_config("EMBER_PREFETCH=auto", "")["memory"]["prefetch"] == "auto");
  CHECK(serve("", "--prefetch --no-prefetch").exit_code != 0);

  const Run help = serve("", "--help");
  for (const char* flag : {"--memory-budget", "--io-backend", "--no-prefetch", "--activation-state", "--replan-tokens"}) {
    INFO(flag);
    CHECK(help.out.find(flag) != std::string::npos);
  }
}

TEST_CASE("ember serve: bad memory settings stop it with one line") {
  check_one_line_error(serve("", "--print-config --memory-budget lots"), "memory.budget");
  check_one_line_error(serve("EMBER_MEMORY_BUDGET=200%", "--print-config"), "EMBER_MEMORY_BUDGET");
  check_one_line_error(serve("EMBER_IO_BACKEND=mmap", "--print-config"), "auto, uring, pread");
  check_one_line_error(serve("", "--print-config --io-backend mmap"), "--io-backend");
  check_one_line_error(serve("EMBER_REPLAN_TOKENS=-3", "--print-config"), "memory.replan_tokens");
  check_one_line_error(serve("", "--print-config --replan-tokens x"), "--replan-tokens");
}

TEST_CASE("ember serve: a budget on a plain model, or below the minimum, fails at startup") {
  Run r = serve("", "-m " + plain_model() + " --port 0 --memory-budget 50%");
  check_one_line_error(r, "memory.budget 50%");
  CHECK(r.err.find("needs a neuron-bundle pack") != std::string::npos);
  r = serve("", "-m " + pack_model() + " --port 0 --memory-budget 100K --io-backend pread");
  check_one_line_error(r, "is too small: the minimum is");
}

TEST_CASE("ember serve under a budget: activation counts saved on SIGTERM, loaded at the next start") {
  const std::string state = (work_dir() / "state" / "counts.activations").string();
  const std::string log1 = (work_dir() / "serve1.log").string();
  const std::string log2 = (work_dir() / "serve2.log").string();
  const std::vector<std::string> args = {"serve",     "-m",           pack_model(),
                                         "--port",    "0",            "--memory-budget",
                                         "90%",       "--sparse",     "predictor",
                                         "--io-backend", "pread",     "--threads",
                                         "1",         "--activation-state", state};
  {
    Daemon d(args, log1);
    const std::string log = wait_for_text(log1, "ember: ready");
    INFO(log);
    CHECK(log.find("no saved activation counts at " + state) != std::string::npos);
    CHECK(log.find("memory budget ") != std::string::npos);
    CHECK(log.find("reads: pread") != std::string::npos);
    CHECK(d.terminate() == 0);
    const std::string all = slurp(log1);
    INFO(all);
    CHECK(all.find("activation counts saved to " + state) != std::string::npos);
  }
  REQUIRE(std::filesystem::exists(state));
  Daemon d(args, log2);
  const std::string log = wait_for_text(log2, "ember: ready");
  INFO(log);
  CHECK(log.find("activation counts loaded from " + state) != std::string::npos);
  CHECK(d.terminate() == 0);
}

// A past crash, end to end: `ember serve` on a pack under a budget, with two threads (the
// prompt's embeddings are read on the pool), and the pack truncated to 20,000 bytes while it
// serves. Before the fix the daemon died (SIGABRT from an io::IoError thrown in a pool worker, or
// SIGSEGV) at the first request. Now each request gets an HTTP answer, 500 model_read_failed
// naming the file, the process lives on, and SIGTERM still stops it cleanly.
TEST_CASE("ember serve under a budget: a pack truncated while serving fails requests with 500, the daemon lives") {
  const std::string pack = (work_dir() / "truncated.pack.gguf").string();
  std::filesystem::copy_file(pack_model(), pack, std::filesystem::copy_options::overwrite_existing);
  const std::string log_path = (work_dir() / "serve-truncated.log").string();
  Daemon d({"serve", "-m", pack, "--port", "0", "--memory-budget", "90%", "--sparse", "predictor", "--threads", "2",
            "--activation-state", ""},
           log_path);
  const std::string log = wait_for_text(log_path, "ember: ready");
  INFO(log);
  REQUIRE(log.find("ember: ready") != std::string::npos);
  const int port = ember::test::logged_port(log);
  REQUIRE(port > 0);
  const std::string body = R"({"prompt":"the quick brown fox jumps over the lazy dog","max_tokens":8,"temperature":0})";
  const std::string good = ember::test::http_request(port, "POST", "/v1/completions", body);
  CHECK(good.find(" 200 ") != std::string::npos);

  std::filesystem::resize_file(pack, 20000);
  for (int i = 0; i < 2; ++i) {
    INFO("request ", i);
    const std::string res = ember::test::http_request(port, "POST", "/v1/completions", body);
    INFO(res);
    CHECK(res.rfind("HTTP/1.", 0) == 0);
    CHECK(res.find(" 500 ") != std::string::npos);
    CHECK(res.find("model_read_failed") != std::string::npos);
    CHECK(res.find("truncated.pack.gguf") != std::string::npos);
    CHECK(d.running());
  }
  const std::string health = ember::test::http_request(port, "GET", "/health");
  CHECK(health.find(" 200 ") != std::string::npos);
  CHECK(d.running());
  CHECK(d.terminate() == 0);
  std::filesystem::remove(pack);
}
