// Sparse decoding on tiny hand-built ReLU/dReLU models: oracle == dense, exact and random
// predictors, ffn_down_t, counters, option checks.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/sparse/sparse_model_builder.h"
#include "tests/sparse/sparse_support.h"

namespace ember {
namespace {

using Mode = SparseOptions::Mode;

SparseOptions mode(Mode m, bool diagnostics = false) {
  SparseOptions o;
  o.mode = m;
  o.diagnostics = diagnostics;
  return o;
}

const std::vector<int32_t> kPrompt = {1, 270, 281, 292};

// Tolerances on the logits (which are O(1)-O(10) here):
// - F32 weights: sparse and dense compute the same products; only the order of the down sums
//   differs (one float rounding per term, ~1e-7 relative, over 256 terms and 2 layers): 1e-4.
// - Q8_0 weights: the dense path rounds the activations h to Q8_0 before the down matmul (relative
//   error up to 1/254 per value), the sparse path uses h exactly: differences of a few 1e-3 per
//   layer output, which the output head turns into ~1e-2 on the logits: 0.05.
float tolerance(GgmlType t) { return t == GgmlType::F32 ? 1e-4f : 0.05f; }

}  // namespace

TEST_CASE("oracle decode equals dense decode on ReLU and dReLU models") {
  for (FfnActivation act : {FfnActivation::ReLU, FfnActivation::DReLU}) {
    for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
      CAPTURE(activation_name(act));
      CAPTURE(type_name(type));
      test::SparseModelSpec spec;
      spec.act = act;
      spec.matrix_type = type;
      const auto path = test::write_sparse_model(spec, "sparse-oracle");
      auto model = Model::load(path.string());
      ThreadPool pool(2);
      const test::GreedyRun dense = test::greedy_run(*model, pool, mode(Mode::Dense), kPrompt, 32);
      const test::GreedyRun oracle = test::greedy_run(*model, pool, mode(Mode::Oracle, true), kPrompt, 32);
      CHECK(oracle.tokens == dense.tokens);
      const float diff = test::max_logit_diff(dense, oracle);
      float peak = 0.0f;
      for (const auto& l : dense.logits) for (float v : l) peak = std::max(peak, std::fabs(v));
      MESSAGE(std::string(activation_name(act)), " ", std::string(type_name(type)), ": max |logit diff| ", diff,
              " (max |logit| ", peak, "), active fraction ", oracle.totals.active_fraction());
      CHECK(diff <= tolerance(type));
      // 31 decode steps (the 4-token prompt is prefill, the last token is never evaluated) x 2 layers.
      CHECK(oracle.totals.tokens == 32 * 2);
      CHECK(oracle.totals.neurons == 32 * 2 * 256);
      // Random symmetric weights: half the gates are positive, a quarter of (gate, up) pairs.
      const double expected = act == FfnActivation::ReLU ? 0.5 : 0.25;
      CHECK(oracle.totals.active_fraction() == doctest::Approx(expected).epsilon(0.3));
      CHECK(oracle.totals.recall() >= 0.999);  // the oracle's set is the true one
      CHECK(oracle.totals.precision() >= 0.999);
      // Dense mode keeps no counters unless asked to.
      CHECK(dense.totals.tokens == 0);
      std::filesystem::remove(path);
    }
  }
}

TEST_CASE("dense diagnostics count the true active set without changing results") {
  test::SparseModelSpec spec;
  spec.act = FfnActivation::ReLU;
  const auto path = test::write_sparse_model(spec, "sparse-diag");
  auto model = Model::load(path.string());
  ThreadPool pool(2);
  const test::GreedyRun plain = test::greedy_run(*model, pool, mode(Mode::Dense), kPrompt, 8);
  const test::GreedyRun counted = test::greedy_run(*model, pool, mode(Mode::Dense, true), kPrompt, 8);
  CHECK(test::max_logit_diff(plain, counted) == 0.0f);
  CHECK(counted.totals.tokens == 8 * 2);
  CHECK(counted.totals.active_fraction() == 1.0);
  CHECK(counted.totals.true_active_fraction() == doctest::Approx(0.5).epsilon(0.3));
  CHECK(counted.totals.ffn_ns > 0);
  CHECK(counted.totals.attention_ns > 0);
  std::filesystem::remove(path);
}

TEST_CASE("an exact predictor (fc1 = gate, fc2 = identity) finds the true active set") {
  for (FfnActivation act : {FfnActivation::ReLU, FfnActivation::DReLU}) {
    CAPTURE(activation_name(act));
    test::SparseModelSpec spec;
    spec.act = act;
    spec.predictor = test::PredictorKind::Exact;
    const auto path = test::write_sparse_model(spec, "sparse-exact-pred");
    auto model = Model::load(path.string());
    REQUIRE(model->file().is_powerinfer());
    REQUIRE(model->weights().has_predictor());
    CHECK(model->weights().max_predictor_rank() == 256);
    CHECK(model->config().sparse_threshold == 0.0f);
    ThreadPool pool(2);
    const test::GreedyRun dense = test::greedy_run(*model, pool, mode(Mode::Dense), kPrompt, 32);
    const test::GreedyRun pred = test::greedy_run(*model, pool, mode(Mode::Predictor, true), kPrompt, 32);
    CHECK(pred.tokens == dense.tokens);
    CHECK(test::max_logit_diff(dense, pred) <= tolerance(GgmlType::F32));
    // The predictor reads the residual before ffn_norm; with norm weights 1 the sign of gate . x is
    // that of gate . norm(x): every truly active neuron is predicted.
    CHECK(pred.totals.recall() == 1.0);
    if (act == FfnActivation::ReLU) {
      CHECK(pred.totals.precision() == 1.0);
    } else {
      // dReLU also needs up > 0, which this predictor does not see: about half the predicted fire.
      CHECK(pred.totals.precision() == doctest::Approx(0.5).epsilon(0.3));
    }
    CHECK(pred.totals.predictor_ns > 0);
    MESSAGE(std::string(activation_name(act)), " exact predictor: recall ", pred.totals.recall(), " precision ",
            pred.totals.precision(), " active ", pred.totals.active_fraction());
    std::filesystem::remove(path);
  }
}

TEST_CASE("a quantized exact predictor keeps recall; a random one reports recall and precision") {
  test::SparseModelSpec spec;
  spec.act = FfnActivation::ReLU;
  spec.matrix_type = GgmlType::Q8_0;
  spec.predictor = test::PredictorKind::Exact;
  spec.predictor_type = GgmlType::Q8_0;
  auto path = test::write_sparse_model(spec, "sparse-q8-pred");
  {
    auto model = Model::load(path.string());
    ThreadPool pool(2);
    const test::GreedyRun dense = test::greedy_run(*model, pool, mode(Mode::Dense), kPrompt, 16);
    const test::GreedyRun pred = test::greedy_run(*model, pool, mode(Mode::Predictor, true), kPrompt, 16);
    CHECK(pred.tokens == dense.tokens);
    CHECK(pred.totals.recall() >= 0.97);
    CHECK(pred.totals.precision() >= 0.97);
  }
  std::filesystem::remove(path);

  spec.predictor = test::PredictorKind::Random;
  spec.rank = 32;
  spec.predictor_type = GgmlType::Q4_0;
  spec.sparse_threshold = 0.1f;
  path = test::write_sparse_model(spec, "sparse-random-pred");
  {
    auto model = Model::load(path.string());
    CHECK(model->config().sparse_threshold == 0.1f);
    ThreadPool pool(2);
    SparseOptions o = mode(Mode::Predictor, true);
    const test::GreedyRun pred = test::greedy_run(*model, pool, o, kPrompt, 16);
    CHECK(pred.totals.tokens == 16 * 2);
    CHECK(pred.totals.active > 0);
    CHECK(pred.totals.active < pred.totals.neurons);
    CHECK(pred.totals.recall() > 0.0);
    CHECK(pred.totals.recall() < 1.0);
    CHECK(pred.totals.precision() > 0.0);
    CHECK(pred.totals.precision() < 1.0);
    // A higher threshold predicts fewer neurons.
    o.threshold_override = 1.0f;
    const test::GreedyRun strict = test::greedy_run(*model, pool, o, kPrompt, 16);
    CHECK(strict.totals.active < pred.totals.active);
    // Per-layer thresholds take precedence.
    o.layer_thresholds = {1e6f, 1e6f};
    const test::GreedyRun none = test::greedy_run(*model, pool, o, kPrompt, 4);
    CHECK(none.totals.active == 0);
  }
  std::filesystem::remove(path);
}

TEST_CASE("ffn_down_t from the file gives the same results as the transposed copy") {
  test::SparseModelSpec spec;
  spec.act = FfnActivation::DReLU;
  const auto plain_path = test::write_sparse_model(spec, "sparse-no-down-t");
  spec.down_t = true;
  const auto t_path = test::write_sparse_model(spec, "sparse-down-t");
  auto plain = Model::load(plain_path.string());
  auto with_t = Model::load(t_path.string());
  REQUIRE(with_t->weights().has_down_t());
  REQUIRE(!plain->weights().has_down_t());
  ThreadPool pool(2);
  const test::GreedyRun a = test::greedy_run(*plain, pool, mode(Mode::Oracle), kPrompt, 16);
  const test::GreedyRun b = test::greedy_run(*with_t, pool, mode(Mode::Oracle), kPrompt, 16);
  CHECK(plain->weights().neuron_rows_bytes() == 2u * 256 * 64 * 4);  // F32 copy of two layers
  CHECK(with_t->weights().neuron_rows_bytes() == 0);
  CHECK(a.tokens == b.tokens);
  CHECK(test::max_logit_diff(a, b) == 0.0f);  // the same F32 values in the same order
  std::filesystem::remove(plain_path);
  std::filesystem::remove(t_path);

  // A quantized ffn_down_t is dequantized slice by slice: close to dense.
  spec.down_t_type = GgmlType::Q8_0;
  const auto q_path = test::write_sparse_model(spec, "sparse-down-t-q8");
  auto q = Model::load(q_path.string());
  const test::GreedyRun dense = test::greedy_run(*q, pool, mode(Mode::Dense), kPrompt, 16);
  const test::GreedyRun c = test::greedy_run(*q, pool, mode(Mode::Oracle), kPrompt, 16);
  CHECK(c.tokens == dense.tokens);
  CHECK(test::max_logit_diff(dense, c) <= 0.05f);
  std::filesystem::remove(q_path);
}

TEST_CASE("sparse options that do not fit the model are refused") {
  test::SparseModelSpec spec;
  spec.act = FfnActivation::SiLU;
  const auto path = test::write_sparse_model(spec, "sparse-silu");
  auto model = Model::load(path.string());
  ThreadPool pool(1);
  auto error = [&](const SparseOptions& s) {
    ContextOptions o;
    o.n_ctx = 64;
    o.sparse = s;
    try {
      InferenceContext ctx(*model, pool, o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error(mode(Mode::Oracle)).find("oracle needs a ReLU-family FFN") != std::string::npos);
  CHECK(error(mode(Mode::Predictor)).find("needs predictor tensors") != std::string::npos);
  SparseOptions t = mode(Mode::Threshold);
  t.layer_thresholds = {0.1f};
  CHECK(error(t).find("1 layer thresholds given, the model has 2 layers") != std::string::npos);
  t.layer_thresholds = {};
  t.target_sparsity = 1.0f;
  CHECK(error(t).find("target sparsity") != std::string::npos);
  t.target_sparsity = 0.5f;
  CHECK(error(t).empty());
  std::filesystem::remove(path);
}

TEST_CASE("threshold mode on a SiLU model: zero skips nothing, a target sparsity is met") {
  test::SparseModelSpec spec;
  spec.act = FfnActivation::SiLU;
  const auto path = test::write_sparse_model(spec, "sparse-silu-threshold");
  auto model = Model::load(path.string());
  ThreadPool pool(2);
  const test::GreedyRun dense = test::greedy_run(*model, pool, mode(Mode::Dense), kPrompt, 16);
  SparseOptions o = mode(Mode::Threshold);
  o.threshold_override = 0.0f;
  const test::GreedyRun zero = test::greedy_run(*model, pool, o, kPrompt, 16);
  CHECK(test::max_logit_diff(dense, zero) == 0.0f);  // nothing skipped: the dense kernels run
  CHECK(zero.totals.active_fraction() == 1.0);
  o.threshold_override = NAN;
  o.target_sparsity = 0.4f;
  const test::GreedyRun forty = test::greedy_run(*model, pool, o, kPrompt, 16);
  CHECK(forty.totals.active_fraction() == doctest::Approx(0.6).epsilon(0.01));
  std::filesystem::remove(path);
}

}  // namespace ember
