// Constrained decoding and log-probabilities through the engine thread (no HTTP), on the tiny
// synthetic model: its text is gibberish, so only the grammar makes the output valid.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/grammar/grammar.h"
#include "core/grammar/json_schema.h"
#include "server/engine_worker.h"
#include "tests/server/tiny_model.h"

namespace ember::server {
namespace {

std::unique_ptr<EngineWorker> make_engine() {
  EngineOptions eo;
  eo.threads = 1;
  eo.context.n_ctx = 512;
  return std::make_unique<EngineWorker>(Model::load(test_server::tiny_model_path()), eo);
}

struct Result {
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  GenerationStats stats;
  std::exception_ptr error;
};

Result run(EngineWorker& engine, GenerationJob job) {
  auto out = std::make_shared<Result>();
  auto done = std::make_shared<std::promise<void>>();
  auto ready = done->get_future();
  job.prompt = engine.model().tokenizer().encode("hello there", true, false);
  job.on_text = [out](std::string_view t) { out->text += t; };
  job.on_logprobs = [out](TokenLogprobs lp) { out->logprobs.push_back(std::move(lp)); };
  job.on_done = [out, done](const GenerationStats& s, std::exception_ptr e) {
    out->stats = s;
    out->error = e;
    done->set_value();
  };
  REQUIRE(engine.try_submit(std::move(job)));
  REQUIRE(ready.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  return *out;
}

}  // namespace

TEST_CASE("constrained engine: seeded jobs with a schema always give a valid document") {
  auto engine = make_engine();
  const auto grammar = grammar::Grammar::parse(grammar::json_schema_to_gbnf(std::string_view(
      R"({"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer","minimum":0,"maximum":99},)"
      R"("c":{"enum":["red","green"]}},"required":["ok","n","c"],"additionalProperties":false})")));
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    GenerationJob job;
    job.grammar = grammar;
    job.sampling.temperature = 1.0f;
    job.sampling.seed = seed;
    job.max_tokens = 200;
    const Result r = run(*engine, std::move(job));
    CAPTURE(r.text);
    REQUIRE(!r.error);
    CHECK(r.stats.finish == FinishReason::EndOfGeneration);
    const auto doc = nlohmann::json::parse(r.text);
    CHECK(doc.at("ok").is_boolean());
    CHECK(doc.at("n").get<int>() >= 0);
    CHECK(doc.at("n").get<int>() <= 99);
    CHECK((doc.at("c") == "red" || doc.at("c") == "green"));
    CHECK(doc.size() == 3);
  }
}

TEST_CASE("constrained engine: max_tokens cuts a constrained answer with Length") {
  auto engine = make_engine();
  GenerationJob job;
  job.grammar = grammar::Grammar::parse(R"(root ::= "[" [a-z]+ "]")");
  job.max_tokens = 3;
  job.sampling.seed = 7;
  const Result r = run(*engine, std::move(job));
  REQUIRE(!r.error);
  CHECK(r.stats.finish == FinishReason::Length);
  CHECK(r.text.rfind("[", 0) == 0);
}

TEST_CASE("constrained engine: logprobs are the log-softmax of the masked logits") {
  auto engine = make_engine();
  GenerationJob job;
  job.grammar = grammar::Grammar::parse(R"(root ::= "yes" | "no")");
  job.top_logprobs = 5;
  job.sampling.temperature = 0.0f;
  job.max_tokens = 10;
  const Result r = run(*engine, std::move(job));
  REQUIRE(!r.error);
  CHECK((r.text == "yes" || r.text == "no"));
  REQUIRE(!r.logprobs.empty());
  std::string joined;
  for (const TokenLogprobs& t : r.logprobs) {
    joined += t.chosen.token;
    CHECK(t.chosen.logprob <= 0.0f);
    REQUIRE(!t.top.empty());
    CHECK(t.top.size() <= 5);
    // Greedy: the chosen token is the most likely one.
    CHECK(t.top.front().logprob >= t.chosen.logprob);
    CHECK(t.top.front().token == t.chosen.token);
    // Only allowed tokens have a probability, and together they have all of it.
    double mass = 0;
    for (const TokenAlternative& a : t.top) {
      CHECK(std::isfinite(a.logprob));
      mass += std::exp(a.logprob);
    }
    CHECK(mass <= 1.0 + 1e-4);
  }
  CHECK(joined == r.text);
  // The first token chooses between the two branches' starts only.
  for (const TokenAlternative& a : r.logprobs.front().top) {
    CHECK((std::string("yes").rfind(a.token, 0) == 0 || std::string("no").rfind(a.token, 0) == 0));
  }
}

TEST_CASE("constrained engine: no logprobs unless asked") {
  auto engine = make_engine();
  GenerationJob job;
  job.max_tokens = 4;
  const Result r = run(*engine, std::move(job));
  CHECK(r.logprobs.empty());
}

}  // namespace ember::server
