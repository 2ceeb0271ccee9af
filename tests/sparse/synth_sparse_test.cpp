// Sparse decoding on `ember synth` models with ReLU / dReLU FFNs and PowerInfer predictors: oracle
// decode equals dense; the predictor's recall and precision as the counters report them.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "core/synth/synth_writer.h"
#include "tests/sparse/sparse_support.h"

namespace ember {
namespace {

std::filesystem::path synth_model(FfnActivation act, GgmlType type, bool predictor, const std::string& name) {
  synth::SynthOptions o;
  o.preset = "tiny";
  o.type = type;
  o.activation = act;
  o.predictor = predictor;
  o.threads = 2;
  o.output_path = (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".gguf")).string();
  synth::write_synth_model(o);
  return o.output_path;
}

}  // namespace

TEST_CASE("synthetic ReLU/dReLU models: oracle == dense, predictor recall and precision") {
  const std::vector<int32_t> prompt = {1, 300, 301, 302, 303, 304, 305, 306};
  for (FfnActivation act : {FfnActivation::ReLU, FfnActivation::DReLU}) {
    for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
      CAPTURE(activation_name(act));
      CAPTURE(type_name(type));
      const auto path = synth_model(act, type, true, "sparse-synth");
      auto model = Model::load(path.string());
      REQUIRE(model->config().activation == act);
      REQUIRE(model->weights().has_predictor());
      ThreadPool pool(2);
      SparseOptions dense_opts, oracle_opts, pred_opts;
      oracle_opts.mode = SparseOptions::Mode::Oracle;
      oracle_opts.diagnostics = true;
      pred_opts.mode = SparseOptions::Mode::Predictor;
      pred_opts.diagnostics = true;
      const test::GreedyRun dense = test::greedy_run(*model, pool, dense_opts, prompt, 32);
      // The oracle follows the dense run's tokens, so logits compare position by position even
      // past a near-tie (the Q8_0 dense path rounds activations to 8 bits; a step whose two best
      // logits are closer than that rounding may go either way).
      const test::GreedyRun oracle = test::greedy_run(*model, pool, oracle_opts, prompt, 32, &dense.tokens);
      const test::GreedyRun pred = test::greedy_run(*model, pool, pred_opts, prompt, 32, &dense.tokens);
      const float diff = test::max_logit_diff(dense, oracle);
      // F32: only the order of float sums differs. Q8_0: the dense path's Q8_0 rounding of the
      // activations (see the kernel test).
      const float tolerance = type == GgmlType::F32 ? 1e-3f : 0.1f;
      CHECK(diff <= tolerance);
      // Same greedy token at every step, except where dense itself is within 2x tolerance of a tie.
      int near_ties = 0;
      for (size_t st = 0; st < dense.logits.size(); ++st) {
        std::vector<float> top = dense.logits[st];
        std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
        if (top[0] - top[1] <= 2 * tolerance) {
          ++near_ties;
          continue;
        }
        const auto& o = oracle.logits[st];
        CHECK(test::argmax(o.data(), static_cast<int64_t>(o.size())) == dense.tokens[st]);
      }
      CHECK(near_ties < 8);  // most steps are compared
      double kl = 0, top1 = 0;
      test::kl_and_top1(dense, pred, &kl, &top1);
      std::printf("synth tiny %s %s: oracle max|dlogit| %.2g, true active %.3f; predictor (threshold %g): "
                  "active %.3f recall %.3f precision %.3f, KL %.4f top-1 %.3f (near-ties skipped: %d)\n",
                  activation_name(act), std::string(type_name(type)).c_str(), diff,
                  oracle.totals.true_active_fraction(), model->config().sparse_threshold,
                  pred.totals.active_fraction(), pred.totals.recall(), pred.totals.precision(), kl, top1, near_ties);
      CHECK(oracle.totals.recall() >= 0.999);
      CHECK(pred.totals.tokens == 32u * static_cast<uint64_t>(model->config().n_layer));
      CHECK(pred.totals.recall() > 0.0);
      std::filesystem::remove(path);
    }
  }
}

}  // namespace ember
