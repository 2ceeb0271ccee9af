// The command line is a contract other tools rely on: exact stdout, one-line errors, non-zero
// exit codes. These tests run the built `ember` binary.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support/fixtures.h"

namespace {

struct Result {
  int exit_code;
  std::string out;
};

// Runs `ember ARGS`, capturing stdout (stderr goes to a file whose text is returned in err_path).
Result run_ember_env(const std::string& env, const std::string& args, const std::string& stderr_to = "/dev/null") {
  const std::string cmd = env + " " + std::string(EMBER_BINARY) + " " + args + " 2>" + stderr_to;
  Result r{-1, {}};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

Result run_ember(const std::string& args, const std::string& stderr_to = "/dev/null") {
  return run_ember_env("", args, stderr_to);
}

std::string slurp(const std::string& path) {
  std::string s;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) s.append(buf.data(), n);
    std::fclose(f);
  }
  return s;
}

}  // namespace

TEST_CASE("ember --help and every subcommand's --help succeed") {
  CHECK(run_ember("--help").exit_code == 0);
  for (const char* sub : {"run", "tokenize", "synth", "bench", "serve", "profile", "pack", "eval"}) {
    const Result r = run_ember(std::string(sub) + " --help");
    INFO(sub);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("--") != std::string::npos);
  }
}

TEST_CASE("a missing model file, a bad flag and a bad model give a one-line error and a non-zero exit") {
  const std::string err = "/tmp/ember-cli-test-" + std::to_string(::getpid()) + ".err";
  Result r = run_ember("run -m /nonexistent/model.gguf -p hi", err);
  CHECK(r.exit_code != 0);
  CHECK(r.out.empty());
  CHECK(slurp(err).find("nonexistent") != std::string::npos);

  r = run_ember("run --no-such-flag", err);
  CHECK(r.exit_code != 0);

  const std::string bad = "/tmp/ember-cli-test-" + std::to_string(::getpid()) + ".gguf";
  if (FILE* f = std::fopen(bad.c_str(), "wb")) {
    std::fputs("NOTAGGUFFILE-----------------------", f);
    std::fclose(f);
  }
  r = run_ember("run -m " + bad + " -p hi", err);
  CHECK(r.exit_code != 0);
  const std::string e = slurp(err);
  CHECK(e.rfind("ember: error: ", 0) == 0);
  CHECK(std::count(e.begin(), e.end(), '\n') == 1);
  std::remove(bad.c_str());
  std::remove(err.c_str());
}

TEST_CASE("ember run prints exactly the generated text and ember tokenize one line of ids") {
  auto model = ember::test::fixture("models/stories260K.gguf");
  if (!model) return;
  // The first reference continuation of stories260K.greedy.jsonl, 16 tokens.
  Result r = run_ember("run -m " + model->string() + " -p 'Once upon a time' -n 16 --temp 0");
  CHECK(r.exit_code == 0);
  CHECK(r.out == ", there was a little girl named Lily. She loved to play");

  r = run_ember("run -m " + model->string() + " -p 'Once upon a time' -n 4 --temp 0 --print-token-ids");
  CHECK(r.out == "[432,383,286,261]\n");

  r = run_ember("tokenize -m " + model->string() + " 'Once upon a time'");
  CHECK(r.exit_code == 0);
  CHECK(r.out == "403 407 261 378\n");
  r = run_ember("tokenize --bos -m " + model->string() + " 'Once upon a time'");
  CHECK(r.out == "1 403 407 261 378\n");
}

TEST_CASE("sampling with a seed is reproducible from the command line") {
  auto model = ember::test::fixture("models/stories260K.gguf");
  if (!model) return;
  const std::string args = "run -m " + model->string() + " -p 'Once upon a time' -n 24 --temp 1.0 --seed 42";
  const Result a = run_ember(args), b = run_ember(args);
  CHECK(a.exit_code == 0);
  CHECK(a.out == b.out);
  CHECK(!a.out.empty());
}

TEST_CASE("ember run without a model creates and uses the built-in demo model") {
  const std::string cache = "/tmp/ember-cli-demo-" + std::to_string(::getpid());
  const Result r = run_ember_env("EMBER_CACHE=" + cache, "run -p 'Hello' -n 8 --temp 0 --print-token-ids");
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("[", 0) == 0);
  CHECK(std::count(r.out.begin(), r.out.end(), ',') == 7);
  FILE* f = std::fopen((cache + "/models/demo-tiny-Q8_0-v2.gguf").c_str(), "rb");
  CHECK(f != nullptr);
  if (f) std::fclose(f);
  std::system(("rm -rf " + cache).c_str());
}
