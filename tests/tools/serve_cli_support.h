#pragma once
// Shared by the `ember serve` command-line tests: run the binary in a clean environment and read
// its --print-config output.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

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

}  // namespace ember::test
