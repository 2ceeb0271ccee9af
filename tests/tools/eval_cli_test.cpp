// `ember eval` from the command line: one JSON object with the documented keys, errors as one line
// with exit code 1.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/fixtures.h"
#include "tests/tools/run_ember.h"

namespace {

using EvalRun = ember::test::EmberRun;

EvalRun run_eval(const std::string& args) { return ember::test::run_ember("eval " + args); }

std::string story() { return (ember::test::source_dir() / "tests" / "data" / "story.txt").string(); }

}  // namespace

TEST_CASE("ember eval --json prints one object with the required keys" * ember::test::needs_fixtures) {
  auto model = ember::test::fixture("models/stories260K.gguf");
  if (!model) return;
  const std::string m = "-m " + model->string() + " -f " + story() + " -t 1";

  EvalRun r = run_eval(m + " --max-tokens 100 --json");
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(r.out);  // throws (fails the test) unless it is JSON
  CHECK(r.out.find('\n') == r.out.size() - 1);      // one line
  CHECK(j["tokens"] == 100);
  CHECK(j["perplexity"].get<double>() > 1.0);
  CHECK(j["kl_mean"].is_null());  // no --compare-dense
  CHECK(j["top1_agreement"].is_null());
  CHECK(j["ffn_active_fraction"] == 1.0);
  CHECK(j["mode"] == "dense");
  CHECK(j["target_sparsity"].is_null());
  CHECK(j["layer_active_fraction"].is_array());
  CHECK(j.contains("elapsed_s"));

  r = run_eval(m + " --skip-tokens 50 --max-tokens 100 --sparsity 0.5 --compare-dense --json");
  REQUIRE(r.exit_code == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["mode"] == "threshold");
  CHECK(j["target_sparsity"] == 0.5);
  CHECK(j["threshold_source"] == "per-token quantile");
  CHECK(j["kl_mean"].get<double>() > 0.0);
  CHECK(j["top1_agreement"].get<double>() > 0.0);
  CHECK(j["ffn_active_fraction"].get<double>() == doctest::Approx(0.5).epsilon(0.02));
  CHECK(j["layer_thresholds"].size() == j["layer_active_fraction"].size());

  r = run_eval(m + " --max-tokens 40");  // the human summary
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("perplexity") != std::string::npos);
}

TEST_CASE("ember eval --profile: per-layer thresholds calibrated by ember profile" *
          ember::test::needs_fixtures) {
  auto model = ember::test::fixture("models/stories260K.gguf");
  if (!model) return;
  const std::string profile = "/tmp/ember-eval-cli-" + std::to_string(::getpid()) + ".profile";
  const std::string make_profile =
      "profile -m " + model->string() + " -f " + story() + " --max-tokens 400 -t 1 -o " + profile;
  REQUIRE(ember::test::run_ember(make_profile).exit_code == 0);
  const std::string m = "-m " + model->string() + " -f " + story() + " -t 1 --skip-tokens 400 --max-tokens 200 ";

  EvalRun r = run_eval(m + "--sparsity 0.5 --profile " + profile + " --compare-dense --json");
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["threshold_source"] == "profile");
  for (const auto& t : j["layer_thresholds"]) CHECK(t.get<double>() > 0.0);  // fixed numbers, not the quantile
  // Calibrated on other text, so near the target rather than exactly on it.
  CHECK(j["ffn_active_fraction"].get<double>() == doctest::Approx(0.5).epsilon(0.15));
  CHECK(j["kl_mean"].get<double>() > 0.0);

  r = run_eval(m + "--sparsity 0.5 --sparse-threshold 0.1 --profile " + profile);
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("--sparse-threshold") != std::string::npos);
  std::remove(profile.c_str());
}

TEST_CASE("ember eval: a missing, empty or too short text is an error with exit code 1" *
          ember::test::needs_fixtures) {
  auto model = ember::test::fixture("models/stories260K.gguf");
  if (!model) return;
  const std::string m = "-m " + model->string() + " ";

  EvalRun r = run_eval(m + "-f /nonexistent/text.txt --json");
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("ember: error: ", 0) == 0);
  CHECK(r.err.find("/nonexistent/text.txt") != std::string::npos);

  const std::string empty = "/tmp/ember-eval-empty-" + std::to_string(::getpid()) + ".txt";
  if (FILE* f = std::fopen(empty.c_str(), "wb")) std::fclose(f);
  r = run_eval(m + "-f " + empty);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("empty") != std::string::npos);

  r = run_eval(m + "-f " + story() + " --max-tokens 1");
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("at least 2") != std::string::npos);
  r = run_eval(m + "-f " + story() + " --skip-tokens 100000");
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("at least 2") != std::string::npos);
  std::remove(empty.c_str());

  r = run_eval(m + "-f " + story() + " --profile " + story());  // --profile without --sparsity
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("--sparsity") != std::string::npos);
}
