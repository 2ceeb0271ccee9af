// The command line is a contract other tools rely on: exact stdout, one-line errors, non-zero
// exit codes. These tests run the built `ember` binary.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support/fixtures.h"
#include "tests/tools/run_ember.h"

namespace {

using Result = ember::test::EmberRun;
using ember::test::run_ember;

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
  Result r = run_ember("run -m /nonexistent/model.gguf -p hi");
  CHECK(r.exit_code != 0);
  CHECK(r.out.empty());
  CHECK(r.err.find("nonexistent") != std::string::npos);

  r = run_ember("run --no-such-flag");
  CHECK(r.exit_code != 0);

  const std::string bad = "/tmp/ember-cli-test-" + std::to_string(::getpid()) + ".gguf";
  if (FILE* f = std::fopen(bad.c_str(), "wb")) {
    std::fputs("NOTAGGUFFILE-----------------------", f);
    std::fclose(f);
  }
  r = run_ember("run -m " + bad + " -p hi");
  CHECK(r.exit_code != 0);
  const std::string& e = r.err;
  CHECK(e.rfind("ember: error: ", 0) == 0);
  CHECK(std::count(e.begin(), e.end(), '\n') == 1);
  std::remove(bad.c_str());
}

TEST_CASE("ember run prints exactly the generated text and ember tokenize one line of ids" *
          ember::test::needs_fixtures) {
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

TEST_CASE("sampling with a seed is reproducible from the command line" * ember::test::needs_fixtures) {
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
  const Result r = run_ember("run -p 'Hello' -n 8 --temp 0 --print-token-ids", "EMBER_CACHE=" + cache);
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("[", 0) == 0);
  CHECK(std::count(r.out.begin(), r.out.end(), ',') == 7);
  FILE* f = std::fopen((cache + "/models/demo-tiny-Q8_0-v2.gguf").c_str(), "rb");
  CHECK(f != nullptr);
  if (f) std::fclose(f);
  std::system(("rm -rf " + cache).c_str());
}

TEST_CASE("ember bench --prompt-file measures the text's first tokens and refuses a text that is too short" *
          ember::test::needs_fixtures) {
  auto model = ember::test::fixture("models/stories260K.gguf");
  if (!model) return;
  const std::string text = "/tmp/ember-cli-test-prompt-" + std::to_string(::getpid()) + ".txt";
  if (FILE* f = std::fopen(text.c_str(), "wb")) {
    std::fputs("Once upon a time there was a little girl who loved to play in the park.", f);
    std::fclose(f);
  }
  const std::string base = "bench -m " + model->string() + " -t 1 --gen-tokens 2 --runs 1 --json --prompt-file " + text;
  Result r = run_ember(base + " --prompt-tokens 6");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("\"prompt_tokens\":6") != std::string::npos);
  CHECK(r.out.find("\"prompt\":\"" + text + "\"") != std::string::npos);

  r = run_ember(base + " --prompt-tokens 500");
  CHECK(r.exit_code != 0);
  CHECK(r.err.find(text) != std::string::npos);
  CHECK(r.err.find("fewer than --prompt-tokens 500") != std::string::npos);
  std::remove(text.c_str());
}
