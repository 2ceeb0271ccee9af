// Sparse decoding of mixture-of-experts models (tiny hand-built dReLU experts with neuron-major
// down projections): oracle and an exact predictor reproduce dense MoE; settings that cannot work
// are refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/model/moe_model_builder.h"
#include "tests/sparse/sparse_support.h"

namespace ember {
namespace {

using Mode = SparseOptions::Mode;

test::MoeModelSpec sparse_moe_spec() {
  test::MoeModelSpec spec;
  spec.activation = "drelu";
  spec.down = false;  // as sparse MoE files: the down projection only neuron-major
  spec.down_t = true;
  spec.n_ff = 128;
  spec.predictor_rank = 128;
  spec.exact_predictor = true;
  return spec;
}

const std::vector<int32_t> kPrompt = {1, 270, 280, 290, 271};

}  // namespace

TEST_CASE("sparse MoE decode: oracle and an exact predictor reproduce dense MoE") {
  for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    CAPTURE(type_name(type));
    test::MoeModelSpec spec = sparse_moe_spec();
    spec.matrix_type = type;
    test::RemoveOnExit file{test::write_moe_model(spec, "moe-sparse")};
    auto model = Model::load(file.path.string());
    ThreadPool pool(2);
    const test::GreedyRun dense = test::greedy_run(*model, pool, {}, kPrompt, 24);
    for (const Mode mode : {Mode::Oracle, Mode::Predictor}) {
      CAPTURE(static_cast<int>(mode));
      SparseOptions o;
      o.mode = mode;
      o.diagnostics = true;
      const test::GreedyRun sparse = test::greedy_run(*model, pool, o, kPrompt, 24);
      CHECK(sparse.tokens == dense.tokens);
      // As for dense sparse models (tests/sparse/sparse_decode_test.cpp): F32 differs only in the
      // order of the down sums; with Q8_0 the dense path rounds h to 8 bits before the down matmul.
      CHECK(test::max_logit_diff(dense, sparse) <= (type == GgmlType::F32 ? 1e-4f : 0.05f));
      CHECK(sparse.totals.tokens == 24 * 2);  // decode steps x layers
      CHECK(sparse.totals.neurons == 24 * 2 * 128 * 2);  // ... x the k = 2 routed experts' neurons
      // A Q8_0 predictor rounds its input with another block scale than the gate's: gates within
      // that rounding of 0 (which add almost nothing) can be missed.
      CHECK(sparse.totals.recall() >= (type == GgmlType::F32 || mode == Mode::Oracle ? 0.999 : 0.99));
      // dReLU on random weights: a quarter of a routed expert's neurons fire; the exact predictor
      // (the gate's sign) lists the half with a positive gate.
      const double expected = mode == Mode::Oracle ? 0.25 : 0.5;
      CHECK(sparse.totals.active_fraction() == doctest::Approx(expected).epsilon(0.3));
    }
  }
}

TEST_CASE("sparse MoE settings that cannot work are refused by name") {
  test::MoeModelSpec spec = sparse_moe_spec();
  test::RemoveOnExit file{test::write_moe_model(spec, "moe-sparse-refuse")};
  auto model = Model::load(file.path.string());
  ThreadPool pool(2);
  ContextOptions o;
  o.sparse.mode = Mode::Threshold;
  CHECK_THROWS_WITH(InferenceContext(*model, pool, o), doctest::Contains("threshold"));
  o.sparse = {};
  o.sparse.diagnostics = true;
  CHECK_THROWS_WITH(InferenceContext(*model, pool, o), doctest::Contains("need a sparse mode"));
  spec.down = true;
  spec.down_t = false;
  test::RemoveOnExit no_t{test::write_moe_model(spec, "moe-sparse-no-down-t")};
  auto plain = Model::load(no_t.path.string());
  o.sparse = {};
  o.sparse.mode = Mode::Predictor;
  CHECK_THROWS_WITH(InferenceContext(*plain, pool, o), doctest::Contains("ffn_down_t"));
  spec.predictor_rank = 0;
  spec.down_t = true;
  test::RemoveOnExit no_pred{test::write_moe_model(spec, "moe-sparse-no-pred")};
  auto unpredicted = Model::load(no_pred.path.string());
  CHECK_THROWS_WITH(InferenceContext(*unpredicted, pool, o), doctest::Contains("predictor"));
}

}  // namespace ember
