// TextEvaluator (core/model/text_evaluation.h): perplexity, KL and top-1 agreement, teacher-forced.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/model/text_evaluation.h"
#include "tests/support/fixtures.h"

namespace ember {
namespace {

std::vector<int32_t> story_tokens(const Model& model, size_t n) {
  std::ifstream in(test::source_dir() / "tests" / "data" / "story.txt", std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::vector<int32_t> ids = model.tokenizer().encode(ss.str(), false, false);
  REQUIRE(ids.size() >= n);
  ids.resize(n);
  return ids;
}

// The reference, written out the plain way: a fresh dense context per window, BOS, then one token
// per eval(), probabilities by softmax over float logits summed in double (differences taken in
// float, so it agrees with the evaluator to float rounding, ~1e-7 relative).
double naive_mean_nll(const Model& model, ThreadPool& pool, const std::vector<int32_t>& tokens, int64_t n_ctx) {
  ContextOptions o;
  o.n_ctx = n_ctx;
  InferenceContext ctx(model, pool, o);
  const int64_t V = model.config().n_vocab;
  const size_t window = static_cast<size_t>(n_ctx - 1);  // stories260K has a BOS token
  double sum = 0.0;
  size_t scored = 0;
  for (size_t start = 0; start < tokens.size(); start += window) {
    ctx.reset();
    int32_t bos = model.tokenizer().bos_id();
    const float* logits = ctx.eval(std::span<const int32_t>(&bos, 1));
    for (size_t i = start; i < tokens.size() && i < start + window; ++i) {
      float mx = logits[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, logits[v]);
      double z = 0.0;
      for (int64_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(logits[v] - mx));
      const double p = std::exp(static_cast<double>(logits[tokens[i]] - mx)) / z;
      sum += -std::log(p);
      ++scored;
      logits = ctx.eval(std::span<const int32_t>(&tokens[i], 1));
    }
  }
  return sum / static_cast<double>(scored);
}

}  // namespace

TEST_CASE("next-token NLL and KL are exact and stable") {
  const float even[2] = {3.0f, 3.0f};
  CHECK(next_token_nll(even, 2, 0) == doctest::Approx(std::log(2.0)));
  const float peaked[3] = {1000.0f, 0.0f, -1000.0f};  // exp() of the raw values would overflow
  CHECK(next_token_nll(peaked, 3, 0) == doctest::Approx(0.0));
  CHECK(next_token_nll(peaked, 3, 1) == doctest::Approx(1000.0));
  CHECK(kl_divergence(peaked, peaked, 3) == 0.0);
  // p = (0.5, 0.5), q = softmax(log 0.25, log 0.75): KL = 0.5 log 2 + 0.5 log(2/3).
  const float q[2] = {std::log(0.25f), std::log(0.75f)};
  CHECK(kl_divergence(even, q, 2) == doctest::Approx(0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0)));
}

TEST_CASE("text evaluation on stories260K: dense against dense, the naive reference, windows, errors" *
          ember::test::needs_fixtures) {
  auto path = test::fixture("models/stories260K.gguf");
  if (!path) return;
  auto model = Model::load(path->string());
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = story_tokens(*model, 200);

  ContextOptions dense;
  TextEvaluator ev(*model, pool, dense, /*compare_dense=*/true);
  CHECK(ev.window_tokens() == ev.context().n_ctx() - 1);
  uint64_t last_done = 0, last_total = 0;
  const TextEvalResult r = ev.evaluate(tokens, [&](uint64_t done, uint64_t total) {
    CHECK(done == last_done + 1);
    last_done = done;
    last_total = total;
  });
  CHECK(r.tokens == 200);  // BOS first, so every text token is predicted
  CHECK(last_done == 200);
  CHECK(last_total == 200);
  CHECK(r.windows == 1);
  CHECK(r.kl_mean < 1e-9);
  CHECK(r.top1_agreement == 1.0);
  CHECK(r.ffn_active_fraction == 1.0);
  CHECK(r.layer_active_fraction.size() == static_cast<size_t>(model->config().n_layer));
  CHECK(std::isfinite(r.perplexity));
  // A tiny story model on a story: far better than uniform over its 512 tokens, far from perfect.
  CHECK(r.perplexity > 1.5);
  CHECK(r.perplexity < 100.0);
  CHECK(r.perplexity == doctest::Approx(std::exp(r.mean_nll)));
  std::printf("stories260K perplexity on the first 200 tokens of story.txt: %.4f\n", r.perplexity);

  // 50 tokens in windows of 19 (n_ctx 20 with BOS): 19 + 19 + 12, each window from scratch.
  const std::vector<int32_t> first50(tokens.begin(), tokens.begin() + 50);
  ContextOptions small;
  small.n_ctx = 20;
  TextEvaluator windowed(*model, pool, small, false);
  const TextEvalResult w = windowed.evaluate(first50);
  CHECK(w.windows == 3);
  CHECK(w.tokens == 50);
  CHECK(std::isnan(w.kl_mean));
  CHECK(std::isnan(w.top1_agreement));
  CHECK(w.mean_nll == doctest::Approx(naive_mean_nll(*model, pool, first50, 20)).epsilon(1e-6));
  ContextOptions big;
  big.n_ctx = 64;
  CHECK(TextEvaluator(*model, pool, big, false).evaluate(first50).mean_nll ==
        doctest::Approx(naive_mean_nll(*model, pool, first50, 64)).epsilon(1e-6));

  CHECK_THROWS_AS(ev.evaluate(std::vector<int32_t>{tokens[0]}), std::invalid_argument);
  CHECK_THROWS_AS(ev.evaluate(std::vector<int32_t>{tokens[0], static_cast<int32_t>(model->config().n_vocab)}),
                  std::out_of_range);
  ContextOptions tiny;
  tiny.n_ctx = 2;
  CHECK_THROWS_AS(TextEvaluator(*model, pool, tiny, false), std::invalid_argument);
}

TEST_CASE("text evaluation on stories260K: threshold mode at sparsity 0.5 against dense" *
          ember::test::needs_fixtures) {
  auto path = test::fixture("models/stories260K.gguf");
  if (!path) return;
  auto model = Model::load(path->string());
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = story_tokens(*model, 200);

  ContextOptions o;
  o.sparse.mode = SparseOptions::Mode::Threshold;
  o.sparse.target_sparsity = 0.5f;
  TextEvaluator ev(*model, pool, o, /*compare_dense=*/true);
  const TextEvalResult r = ev.evaluate(tokens);
  CHECK(r.tokens == 200);
  CHECK(r.kl_mean > 0.0);
  CHECK(std::isfinite(r.kl_mean));
  CHECK(r.top1_agreement > 0.5);
  CHECK(r.top1_agreement <= 1.0);
  CHECK(r.ffn_active_fraction == doctest::Approx(0.5).epsilon(0.02));
  for (double f : r.layer_active_fraction) CHECK(f == doctest::Approx(0.5).epsilon(0.02));
  CHECK(std::isnan(ev.context().sparse_threshold(0)));  // per-token quantile: no fixed threshold
  std::printf("stories260K sparsity 0.5 (per-token quantile), 200 tokens: perplexity %.4f, KL %.4f, top-1 %.3f, "
              "active %.3f\n", r.perplexity, r.kl_mean, r.top1_agreement, r.ffn_active_fraction);

  // A second evaluate() starts its counters afresh.
  const TextEvalResult again = ev.evaluate(std::vector<int32_t>(tokens.begin(), tokens.begin() + 20));
  CHECK(again.ffn_active_fraction == doctest::Approx(0.5).epsilon(0.02));
  CHECK(again.tokens == 20);
}

}  // namespace ember
