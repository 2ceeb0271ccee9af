// `ember serve`'s sparse-FFN settings from the outside: --sparse, --sparse-threshold, --sparsity,
// --profile, --sparse-stats and their EMBER_* variables through --print-config, conflicts refused
// with one line, and a mode the model cannot run refused at startup (not at the first request).
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/tools/serve_cli_support.h"

namespace {

using nlohmann::json;
using Run = ember::test::EmberRun;

using ember::test::print_config;
using ember::test::serve;

void check_one_line_error(const Run& r, const std::string& must_mention) {
  INFO("stderr: ", r.err);
  CHECK(r.exit_code != 0);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("ember: error: ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find(must_mention) != std::string::npos);
}

std::string temp_path(const std::string& suffix) {
  static int counter = 0;
  return "/tmp/ember-serve-sparse-cli-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + suffix;
}

}  // namespace

TEST_CASE("ember serve: sparse flags and variables in --print-config") {
  json j = print_config("", "");
  CHECK(j["sparse"]["mode"] == "dense");
  CHECK(j["sparse"]["threshold"].is_null());
  CHECK(j["sparse"]["sparsity"] == 0.0);

  j = print_config("EMBER_SPARSE=oracle EMBER_SPARSE_STATS=1", "");
  CHECK(j["sparse"]["mode"] == "oracle");
  CHECK(j["sparse"]["stats"] == true);
  // Flags beat the environment.
  j = print_config("EMBER_SPARSE=oracle EMBER_SPARSE_THRESHOLD=0.1",
                   "--sparse predictor --sparse-threshold 0.3 --sparse-stats");
  CHECK(j["sparse"]["mode"] == "predictor");
  CHECK(j["sparse"]["threshold"] == 0.3);
  CHECK(j["sparse"]["stats"] == true);
  j = print_config("EMBER_SPARSITY=0.25", "--sparsity 0.5");
  CHECK(j["sparse"]["sparsity"] == 0.5);

  const Run help = serve("", "--help");
  for (const char* flag : {"--sparse", "--sparse-threshold", "--sparsity", "--profile", "--sparse-stats"}) {
    INFO(flag);
    CHECK(help.out.find(flag) != std::string::npos);
  }
}

TEST_CASE("ember serve: conflicting or bad sparse settings stop it with one line") {
  check_one_line_error(serve("", "--print-config --sparse predictor --sparsity 0.5"),
                       "sparse.sparsity is a threshold-mode setting; it cannot go with sparse.mode predictor");
  check_one_line_error(serve("EMBER_SPARSE=predictor EMBER_SPARSITY=0.5", "--print-config"), "sparse.sparsity");
  check_one_line_error(serve("EMBER_SPARSE=sparse", "--print-config"), "dense, oracle, predictor, threshold");
  check_one_line_error(serve("EMBER_SPARSE_PROFILE=/x.profile", "--print-config"), "give sparse.sparsity too");
}

TEST_CASE("ember serve: a bad profile or a mode the model cannot run fails at startup") {
  const std::string model = temp_path(".gguf");
  REQUIRE(ember::test::run_ember("synth --preset tiny --type Q8_0 -q --threads 1 -o " + model).exit_code == 0);

  // Not a profile: refused before binding or loading.
  const std::string not_profile = temp_path(".profile");
  std::ofstream(not_profile) << "not a profile\n";
  Run r = serve("", "-m " + model + " --port 0 --sparsity 0.5 --profile " + not_profile);
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("ember: error: sparse.profile " + not_profile) != std::string::npos);

  // The plain synthetic model has no predictor tensors: the engine's contexts refuse it.
  r = serve("", "-m " + model + " --port 0 --sparse predictor");
  INFO("stderr: ", r.err);
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("ember: error: sparse.mode predictor does not fit this model") != std::string::npos);
  CHECK(r.err.find("ember: ready") == std::string::npos);
  std::remove(model.c_str());
  std::remove(not_profile.c_str());
}
