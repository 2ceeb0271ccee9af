// Threshold (CATS) mode on the stories260K fixture (a real SiLU llama model).
#include <doctest/doctest.h>

#include <cstdio>

#include "core/model/model.h"
#include "tests/sparse/sparse_support.h"
#include "tests/support/fixtures.h"

namespace ember {

TEST_CASE("threshold mode on stories260K: zero skips nothing; higher thresholds skip more" *
          ember::test::needs_fixtures) {
  auto path = test::fixture("models/stories260K.gguf");
  if (!path) return;
  auto model = Model::load(path->string());
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};  // BOS + a few story tokens
  const int n = 48;
  SparseOptions dense_opts;
  const test::GreedyRun dense = test::greedy_run(*model, pool, dense_opts, prompt, n);

  SparseOptions o;
  o.mode = SparseOptions::Mode::Threshold;
  o.layer_thresholds.assign(static_cast<size_t>(model->config().n_layer), 0.0f);
  const test::GreedyRun zero = test::greedy_run(*model, pool, o, prompt, n);
  CHECK(zero.tokens == dense.tokens);
  CHECK(test::max_logit_diff(dense, zero) == 0.0f);  // nothing skipped: exactly the dense floats
  CHECK(zero.totals.active_fraction() == 1.0);

  o.layer_thresholds.assign(static_cast<size_t>(model->config().n_layer), 0.05f);
  const test::GreedyRun high = test::greedy_run(*model, pool, o, prompt, n);
  CHECK(high.totals.active_fraction() < 0.9);
  CHECK(high.totals.active_fraction() > 0.0);

  // Per-token quantile: the target sparsity is met exactly on every layer and token (up to ties).
  o.layer_thresholds.clear();
  std::printf("stories260K threshold mode (%d positions, teacher-forced on dense greedy tokens):\n", n);
  std::printf("  target  active   KL(dense||sparse)  top-1 agreement\n");
  for (float target : {0.1f, 0.3f, 0.5f, 0.7f}) {
    o.target_sparsity = target;
    // Teacher-forced on the dense run's tokens: logits compare position by position.
    const test::GreedyRun r = test::greedy_run(*model, pool, o, prompt, n, &dense.tokens);
    CHECK(r.totals.active_fraction() == doctest::Approx(1.0 - target).epsilon(0.02));
    double kl = 0, top1 = 0;
    test::kl_and_top1(dense, r, &kl, &top1);
    std::printf("  %.1f     %.3f    %.4f             %.3f\n", target, r.totals.active_fraction(), kl, top1);
    if (target <= 0.1f) CHECK(top1 >= 0.5);
  }
}

}  // namespace ember
