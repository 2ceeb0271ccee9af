// A pack ordered by an activation profile: bundles hottest first, frequencies stored in bundle
// order, predictor rows permuted with them; decoding still matches the source.
#include <doctest/doctest.h>

#include <filesystem>
#include <random>

#include "core/pack/pack_verify.h"
#include "core/synth/synth_writer.h"
#include "tests/pack/pack_support.h"
#include "tests/sparse/sparse_model_builder.h"
#include "tests/sparse/sparse_support.h"

namespace ember {

TEST_CASE("a profile orders the bundles hottest first and its frequencies are stored") {
  test::SparseModelSpec spec;
  spec.act = FfnActivation::DReLU;
  spec.predictor = test::PredictorKind::Random;
  const auto src = test::write_sparse_model(spec, "pack-profile-src");
  ActivationProfile p;
  p.activation = "drelu";
  p.tokens = 1234;
  p.n_ff = spec.n_ff;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  p.layers.resize(static_cast<size_t>(spec.n_layer));
  for (auto& l : p.layers) {
    l.frequency.resize(static_cast<size_t>(spec.n_ff));
    for (float& f : l.frequency) f = u(rng) < 0.2f ? 0.0f : u(rng);  // some ties at 0
    l.gate_magnitude.assign(ActivationProfile::kPercentiles, 0.0f);
  }
  const auto pk = test::make_pack(src, "pack-profile", {}, &p);
  CHECK(pack::verify_pack(src.string(), pk.string()).ok());
  auto model = Model::load(pk.string());
  const ModelWeights& w = model->weights();
  CHECK(w.pack_info().profile_tokens == 1234);
  for (int64_t l = 0; l < spec.n_layer; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::vector<int32_t> hot = p.hot_order(l);
    for (int64_t k = 0; k < spec.n_ff; ++k) {
      CHECK(L.neuron_perm[k] == hot[static_cast<size_t>(k)]);
      CHECK(L.neuron_freq[k] == p.layers[static_cast<size_t>(l)].frequency[static_cast<size_t>(hot[static_cast<size_t>(k)])]);
      if (k > 0) CHECK(L.neuron_freq[k] <= L.neuron_freq[k - 1]);
    }
  }
  auto source = Model::load(src.string());
  ThreadPool pool(2);
  SparseOptions pred;
  pred.mode = SparseOptions::Mode::Predictor;
  const test::GreedyRun a = test::greedy_run(*source, pool, pred, {1}, 24);
  const test::GreedyRun b = test::greedy_run(*model, pool, pred, {1}, 24);
  CHECK(a.tokens == b.tokens);
  CHECK(test::max_logit_diff(a, b) <= 1e-4f);
  std::filesystem::remove(src);
  std::filesystem::remove(pk);
}

TEST_CASE("a synthetic TurboSparse-like model (Q4_0, predictor, ffn_down_t) packs and runs the same") {
  const synth::SynthOptions s = test::tiny_turbosparse_synth("pack-synth-src");
  const auto pk = test::make_pack(s.output_path, "pack-synth", {});
  // An identity pack would hide permutation bugs: also one in reversed order.
  auto src = Model::load(s.output_path);
  const auto pk_rev = test::make_pack(s.output_path, "pack-synth-rev",
                                      test::reversed_orders(src->config().n_layer, src->config().n_ff));
  for (const auto& path : {pk, pk_rev}) {
    CHECK(pack::verify_pack(s.output_path, path.string()).ok());
    auto model = Model::load(path.string());
    CHECK(model->weights().pack_info().layout.down_type == GgmlType::Q4_0);  // ffn_down_t's rows, as they are
    ThreadPool pool(2);
    // Sparse modes from a one-token prompt (no dense prefill): the same rows and scores, only the
    // order of the down sums differs.
    for (SparseOptions::Mode m : {SparseOptions::Mode::Oracle, SparseOptions::Mode::Predictor}) {
      SparseOptions o;
      o.mode = m;
      const test::GreedyRun a = test::greedy_run(*src, pool, o, {1}, 32);
      const test::GreedyRun b = test::greedy_run(*model, pool, o, {1}, 32);
      CHECK(a.tokens == b.tokens);
      MESSAGE("synth tiny drelu Q4_0, mode ", std::string(sparse_mode_name(m)), ": max |logit diff| ", test::max_logit_diff(a, b));
      CHECK(test::max_logit_diff(a, b) <= 1e-3f);
    }
    // Dense with a prompt: the pack's dense path uses ffn_down_t (Q4_0 along the neuron axis), the
    // source's ffn_down (Q4_0 along the other axis); greedy tokens agree, the distributions nearly.
    const std::vector<int32_t> prompt = {1, 50, 60, 70};
    const test::GreedyRun a = test::greedy_run(*src, pool, SparseOptions{}, prompt, 32);
    const test::GreedyRun b = test::greedy_run(*model, pool, SparseOptions{}, prompt, 32);
    CHECK(a.tokens == b.tokens);
    double kl = 0, top1 = 0;
    test::kl_and_top1(a, b, &kl, &top1);
    MESSAGE("synth tiny drelu Q4_0, dense: max |logit diff| ", test::max_logit_diff(a, b), ", KL ", kl, ", top-1 ", top1);
    CHECK(kl < 0.01);
    CHECK(top1 == 1.0);
  }
  std::filesystem::remove(s.output_path);
  std::filesystem::remove(pk);
  std::filesystem::remove(pk_rev);
}

}  // namespace ember
