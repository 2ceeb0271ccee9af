// A job's several prompts (later_prompts) and its prompt log-probabilities (echo): what the engine
// does for /v1/completions with an array of prompts, and with echo + logprobs.
#include <doctest/doctest.h>

#include <cmath>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "core/kernels/thread_pool.h"
#include "core/model/inference_context.h"
#include "core/sampling/token_logprobs.h"
#include "server/engine_worker.h"
#include "tests/server/tiny_model.h"

namespace ember::server {
namespace {

std::unique_ptr<EngineWorker> make_engine(bool reuse = true) {
  EngineOptions eo;
  eo.threads = 1;
  eo.context.n_ctx = 256;
  eo.reuse_prefix = reuse;
  return std::make_unique<EngineWorker>(Model::load(test_server::tiny_model_path()), eo);
}

// Every choice's text, in the order the engine produced them, and the prompts' log-probabilities.
struct Choices {
  std::vector<std::string> texts{1};
  std::vector<GenerationStats> stats;
  std::vector<std::vector<TokenLogprobs>> prompt_logprobs;
  std::exception_ptr error;
  std::promise<void> finished;
};

GenerationJob sampled_job(const Tokenizer& tok, const std::string& prompt, uint64_t seed, Choices& out) {
  GenerationJob job;
  job.prompt = tok.encode(prompt, true, false);
  job.sampling.temperature = 0.9f;
  job.sampling.seed = seed;
  job.max_tokens = 12;
  job.on_text = [&out](std::string_view t) { out.texts.back() += t; };
  job.on_prompt_logprobs = [&out](std::vector<TokenLogprobs> p) { out.prompt_logprobs.push_back(std::move(p)); };
  job.on_choice_end = [&out](const GenerationStats& s) {
    out.stats.push_back(s);
    out.texts.emplace_back();
  };
  job.on_done = [&out](const GenerationStats& s, std::exception_ptr e) {
    out.stats.push_back(s);
    out.error = e;
    out.finished.set_value();
  };
  return job;
}

void run(EngineWorker& engine, GenerationJob job, Choices& out) {
  auto done = out.finished.get_future();
  REQUIRE(engine.try_submit(std::move(job)));
  REQUIRE(done.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  REQUIRE(!out.error);
}

}  // namespace

TEST_CASE("engine: several prompts in one job give each prompt's n choices, as separate jobs would") {
  for (const bool reuse : {true, false}) {
    CAPTURE(reuse);
    auto engine = make_engine(reuse);
    const Tokenizer& tok = engine->model().tokenizer();
    const std::vector<std::string> prompts = {"the quick brown fox", "the quick red", "hello there"};
    Choices together;
    GenerationJob job = sampled_job(tok, prompts[0], 41, together);
    job.choices = 2;
    for (size_t p = 1; p < prompts.size(); ++p) job.later_prompts.push_back(tok.encode(prompts[p], true, false));
    run(*engine, std::move(job), together);
    REQUIRE(together.texts.size() == 6);
    REQUIRE(together.stats.size() == 6);
    for (size_t p = 0; p < prompts.size(); ++p) {
      for (uint64_t c = 0; c < 2; ++c) {
        CAPTURE(p);
        CAPTURE(c);
        Choices alone;
        run(*engine, sampled_job(tok, prompts[p], 41 + c, alone), alone);
        const size_t i = p * 2 + c;
        CHECK(together.texts[i] == alone.texts[0]);
        CHECK(together.stats[i].prompt_tokens == static_cast<int64_t>(tok.encode(prompts[p], true, false).size()));
      }
    }
    // The second prompt shares "the quick" with the first: with reuse on, its first choice
    // evaluates only the rest.
    if (reuse) CHECK(together.stats[2].cached_prompt_tokens > 1);
    if (!reuse) CHECK(together.stats[2].cached_prompt_tokens == 0);
    CHECK(together.prompt_logprobs.empty());  // not asked for
  }
}

TEST_CASE("engine: prompt log-probabilities are the log-softmax of a fresh evaluation of each prefix") {
  auto engine = make_engine();
  const Model& model = engine->model();
  const Tokenizer& tok = model.tokenizer();
  const std::vector<int32_t> prompt = tok.encode("once upon a time there was", true, false);
  REQUIRE(prompt.size() > 3);
  for (const int64_t from : {int64_t{0}, int64_t{1}}) {
    CAPTURE(from);
    // Twice in a row: the second job would reuse the whole prompt, which scoring must not.
    for (int repeat = 0; repeat < 2; ++repeat) {
      Choices out;
      GenerationJob job = sampled_job(tok, "", 1, out);
      job.prompt = prompt;
      job.max_tokens = 0;
      job.top_logprobs = 3;
      job.prompt_logprobs_from = from;
      job.later_prompts.push_back({prompt[0], prompt[1]});
      run(*engine, std::move(job), out);
      REQUIRE(out.prompt_logprobs.size() == 2);  // once per prompt
      CHECK(out.stats[0].generated_tokens == 0);
      CHECK(out.stats[0].finish == FinishReason::Length);
      const std::vector<TokenLogprobs>& got = out.prompt_logprobs[0];
      REQUIRE(got.size() == prompt.size() - static_cast<size_t>(from));
      CHECK(out.prompt_logprobs[1].size() == 2 - static_cast<size_t>(from));
      if (from == 0) {
        CHECK(std::isnan(got[0].chosen.logprob));
        CHECK(got[0].top.empty());
        CHECK(got[0].chosen.token == tok.token_to_piece(prompt[0]));
      }
      ThreadPool pool(1);
      for (size_t p = std::max<size_t>(1, static_cast<size_t>(from)); p < prompt.size(); ++p) {
        CAPTURE(p);
        InferenceContext ctx(model, pool, {});
        const float* logits = ctx.eval(std::span<const int32_t>(prompt.data(), p));
        const SampledLogprobs want =
            token_logprobs(std::span<const float>(logits, static_cast<size_t>(tok.n_vocab())), prompt[p], 3);
        const TokenLogprobs& entry = got[p - static_cast<size_t>(from)];
        CHECK(entry.chosen.token == tok.token_to_piece(prompt[p]));
        CHECK(entry.chosen.logprob == doctest::Approx(want.chosen.logprob).epsilon(1e-3));
        REQUIRE(entry.top.size() == 3);
        CHECK(entry.top[0].logprob >= entry.chosen.logprob - 1e-6f);
        CHECK(entry.top[0].logprob == doctest::Approx(want.top[0].logprob).epsilon(1e-3));
      }
    }
  }
}

}  // namespace ember::server
