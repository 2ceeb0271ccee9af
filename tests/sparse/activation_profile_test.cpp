// ember profile's core: the |act(gate)| histogram and percentiles, the profile file (round trip,
// hostile files), and the profiler against the counters of token-by-token decoding.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include "core/model/inference_context.h"
#include "core/model/profiler_setup.h"
#include "core/sparse/activation_profiler.h"
#include "tests/sparse/sparse_model_builder.h"

namespace ember {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ember_profile_" + std::to_string(getpid()) + "_" + name)).string();
}

ActivationProfile small_profile() {
  ActivationProfile p;
  p.activation = "relu";
  p.tokens = 10;
  p.n_ff = 4;
  for (int l = 0; l < 2; ++l) {
    LayerActivationProfile lp;
    lp.frequency = {0.1f, 0.9f, 0.5f, 0.0f};
    lp.gate_magnitude.resize(ActivationProfile::kPercentiles);
    for (int k = 0; k < ActivationProfile::kPercentiles; ++k) lp.gate_magnitude[static_cast<size_t>(k)] = static_cast<float>(k) * (l + 1);
    lp.active_fraction = 0.375;
    lp.locality = 0.25 * l;
    p.layers.push_back(lp);
  }
  return p;
}

std::vector<int32_t> some_tokens(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(1 + (i * 37 + 11) % 290);
  return t;
}

}  // namespace

TEST_CASE("histogram bins bracket their values and percentiles interpolate") {
  for (float v : {1e-6f, 0.01f, 0.3f, 1.0f, 1.5f, 7.0f, 1000.0f}) {
    const int b = ActivationProfiler::bin_of(v);
    CHECK(ActivationProfiler::bin_low(b) <= v);
    CHECK(v < ActivationProfiler::bin_high(b));
  }
  CHECK(ActivationProfiler::bin_of(0.0f) == 0);
  std::vector<uint64_t> hist(ActivationProfiler::kBins, 0);
  for (int i = 1; i <= 1000; ++i) ++hist[static_cast<size_t>(ActivationProfiler::bin_of(static_cast<float>(i)))];
  CHECK(ActivationProfiler::percentile(hist, 0.5) == doctest::Approx(500.0).epsilon(0.02));
  CHECK(ActivationProfiler::percentile(hist, 0.1) == doctest::Approx(100.0).epsilon(0.02));
  hist.assign(hist.size(), 0);
  hist[0] = 70;  // 70 % exact zeros
  hist[static_cast<size_t>(ActivationProfiler::bin_of(2.0f))] = 30;
  CHECK(ActivationProfiler::percentile(hist, 0.5) == 0.0f);
  CHECK(ActivationProfiler::percentile(hist, 0.9) >= 2.0f);
}

TEST_CASE("profile thresholds, hot order and hot share") {
  const ActivationProfile p = small_profile();
  CHECK(p.threshold_for_sparsity(0, 0.0) == 0.0f);
  CHECK(p.threshold_for_sparsity(0, 0.5) == doctest::Approx(500.0f));
  CHECK(p.threshold_for_sparsity(1, 0.5) == doctest::Approx(1000.0f));
  CHECK(p.threshold_for_sparsity(0, 0.2505) == doctest::Approx(250.5f));
  CHECK_THROWS(p.threshold_for_sparsity(0, 1.0));
  CHECK(p.thresholds_for_sparsity(0.5).size() == 2);
  CHECK(p.hot_order(0) == std::vector<int32_t>{1, 2, 0, 3});
  CHECK(p.hot_share(0, 0.25) == doctest::Approx(0.9 / 1.5));
}

TEST_CASE("profile files round-trip and hostile ones are refused") {
  const ActivationProfile p = small_profile();
  const std::string path = temp_path("round.profile");
  save_activation_profile(p, path);
  const ActivationProfile q = load_activation_profile(path);
  CHECK(q.tokens == 10);
  CHECK(q.activation == "relu");
  REQUIRE(q.layers.size() == 2);
  CHECK(q.layers[1].frequency == p.layers[1].frequency);
  CHECK(q.layers[1].gate_magnitude == p.layers[1].gate_magnitude);
  CHECK(q.layers[1].locality == doctest::Approx(0.25));
  CHECK(std::isnan(q.layers[0].predictor_recall));
  CHECK_NOTHROW(check_profile_matches(q, 2, 4));
  CHECK_THROWS_WITH_AS(check_profile_matches(q, 3, 4), doctest::Contains("2 layers of 4"), std::invalid_argument);

  ActivationProfile bad = small_profile();
  bad.layers[0].frequency[2] = 1.5f;
  save_activation_profile(bad, path);
  CHECK_THROWS_WITH(load_activation_profile(path), doctest::Contains("outside [0, 1]"));
  bad = small_profile();
  bad.layers[1].gate_magnitude[5] = -1.0f;
  save_activation_profile(bad, path);
  CHECK_THROWS_WITH(load_activation_profile(path), doctest::Contains("non-decreasing"));

  // A model file is not a profile; a truncated profile is refused by the GGUF reader.
  test::SparseModelSpec spec;
  const auto model_path = test::write_sparse_model(spec, "profile_not_a_profile.gguf");
  CHECK_THROWS_WITH(load_activation_profile(model_path.string()), doctest::Contains("not an activation profile"));
  std::filesystem::remove(model_path);
  save_activation_profile(p, path);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  CHECK_THROWS(load_activation_profile(path));
  std::filesystem::remove(path);
}

TEST_CASE("the profiler counts the same active neurons as token-by-token decoding") {
  for (FfnActivation act : {FfnActivation::ReLU, FfnActivation::DReLU}) {
    CAPTURE(activation_name(act));
    test::SparseModelSpec spec;
    spec.act = act;
    spec.predictor = test::PredictorKind::Exact;
    const auto path = test::write_sparse_model(spec, std::string("profile_") + activation_name(act) + ".gguf");
    auto model = Model::load(path.string());
    std::filesystem::remove(path);  // mapped: the data stays readable until the model goes
    ThreadPool pool(2);
    const std::vector<int32_t> tokens = some_tokens(40);

    // Reference: one token per eval, diagnostics count the truly active neurons.
    ContextOptions ref_opts;
    ref_opts.n_ctx = 64;
    ref_opts.sparse.diagnostics = true;
    InferenceContext ref(*model, pool, ref_opts);
    for (int32_t t : tokens) ref.eval(std::vector<int32_t>{t});

    ActivationProfiler profiler(profiler_setup_for(*model, 16), pool.size());
    ContextOptions o;
    o.n_ctx = 64;
    o.max_batch = 16;  // several batches, and the last layer of non-final batches is observed too
    o.ffn_observer = &profiler;
    InferenceContext ctx(*model, pool, o);
    ctx.eval(tokens);
    const ActivationProfile p = profiler.result();
    CHECK(p.tokens == tokens.size());
    REQUIRE(p.layers.size() == static_cast<size_t>(model->config().n_layer));
    for (size_t l = 0; l < p.layers.size(); ++l) {
      CAPTURE(l);
      const double expected = ref.sparse_stats()[l].true_active_fraction();
      CHECK(p.layers[l].active_fraction == doctest::Approx(expected).epsilon(0.01));
      const double mean_freq = std::accumulate(p.layers[l].frequency.begin(), p.layers[l].frequency.end(), 0.0) /
                               static_cast<double>(p.n_ff);
      CHECK(mean_freq == doctest::Approx(p.layers[l].active_fraction).epsilon(1e-4));
      CHECK(p.layers[l].locality >= 0.0);
      CHECK(p.layers[l].locality <= 1.0);
      // The exact predictor fires wherever the gate is positive: every active neuron is predicted.
      CHECK(p.layers[l].predictor_recall == doctest::Approx(1.0));
      CHECK(p.layers[l].predictor_precision <= 1.0);
      CHECK(p.layers[l].gate_magnitude.back() > 0.0f);
    }
  }
}

TEST_CASE("SiLU profiles count the upper half of each token as active") {
  test::SparseModelSpec spec;
  spec.act = FfnActivation::SiLU;
  const auto path = test::write_sparse_model(spec, "profile_silu.gguf");
  auto model = Model::load(path.string());
  std::filesystem::remove(path);
  ThreadPool pool(2);
  ActivationProfiler profiler(profiler_setup_for(*model, 64), pool.size());
  ContextOptions o;
  o.n_ctx = 64;
  o.ffn_observer = &profiler;
  InferenceContext ctx(*model, pool, o);
  ctx.eval(some_tokens(30));
  const ActivationProfile p = profiler.result();
  for (const LayerActivationProfile& l : p.layers) CHECK(l.active_fraction == doctest::Approx(0.5).epsilon(0.02));
  // The calibrated threshold for sparsity 0.5 is the median magnitude.
  CHECK(p.threshold_for_sparsity(0, 0.5) > 0.0f);
  CHECK(std::isnan(p.layers[0].predictor_recall));
}

}  // namespace ember
