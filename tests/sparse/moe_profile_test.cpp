// The activation profile of a mixture of experts (tiny hand-built dReLU experts): one unit per
// (layer, expert) fed the tokens routed to it, joint frequencies against a brute-force count from
// the reference matmul, the file's n_expert, and profiles refused for a model of the other kind.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/model/inference_context.h"
#include "core/model/moe_router.h"
#include "core/model/profiler_setup.h"
#include "core/model/routing_stats.h"
#include "core/sparse/moe_activation_profile.h"
#include "tests/model/moe_model_builder.h"

namespace ember {
namespace {

size_t at(int64_t a, int64_t b, int64_t n) { return static_cast<size_t>(a * n + b); }

// Forwards to the profiler and recounts every observation from its residual rows alone: ffn_norm
// (weights 1), the router (each row must have been routed to the unit's expert) and the expert's
// gate and up through the reference matmul.
class BruteForce : public FfnObserver {
 public:
  BruteForce(const Model& m, FfnObserver& inner) : m_(m), inner_(inner) {
    const ModelConfig& c = m.config();
    const int64_t units = c.n_layer * c.n_expert;
    rows.assign(static_cast<size_t>(units), 0);
    active.assign(static_cast<size_t>(units * c.n_ff), 0);
    borderline.assign(active.size(), 0);
  }

  void observe(const FfnObservation& o, ThreadPool& pool) override {
    inner_.observe(o, pool);
    const ModelConfig& c = m_.config();
    const int64_t E = c.n_embd, F = c.n_ff, layer = o.layer / c.n_expert, expert = o.layer % c.n_expert;
    const LayerWeights& L = m_.weights().layers[static_cast<size_t>(layer)];
    const ExpertWeights& ex = L.experts[static_cast<size_t>(expert)];
    std::vector<float> x(static_cast<size_t>(E)), g(static_cast<size_t>(F)), u(g.size()), logits(static_cast<size_t>(c.n_expert));
    for (int64_t t = 0; t < o.n_tokens; ++t) {
      const float* r = o.residual + t * E;
      double ss = 0.0;
      for (int64_t d = 0; d < E; ++d) ss += static_cast<double>(r[d]) * r[d];
      const auto scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(E) + 1e-5));
      for (int64_t d = 0; d < E; ++d) x[static_cast<size_t>(d)] = r[d] * scale;
      matmul_reference(L.ffn_gate_inp, x.data(), 1, E, logits.data(), c.n_expert);
      std::vector<int32_t> chosen(static_cast<size_t>(c.n_expert_used));
      std::vector<float> weights(chosen.size());
      route_token(logits.data(), c.n_expert, c.n_expert_used, chosen.data(), weights.data());
      misrouted += std::count(chosen.begin(), chosen.end(), expert) == 1 ? 0 : 1;
      matmul_reference(ex.gate, x.data(), 1, E, g.data(), F);
      matmul_reference(ex.up, x.data(), 1, E, u.data(), F);
      for (int64_t i = 0; i < F; ++i) {
        const size_t k = at(o.layer, i, F);
        max_gate_error = std::max(max_gate_error, std::fabs(g[static_cast<size_t>(i)] - o.gate[t * F + i]));
        active[k] += neuron_activation(c.activation, g[static_cast<size_t>(i)], u[static_cast<size_t>(i)]) != 0.0f;
        // The kernels round otherwise than the reference: a value this close to 0 may flip.
        borderline[k] += std::min(std::fabs(g[static_cast<size_t>(i)]), std::fabs(u[static_cast<size_t>(i)])) < 1e-4f;
      }
    }
    rows[static_cast<size_t>(o.layer)] += static_cast<uint64_t>(o.n_tokens);
  }

  std::vector<uint64_t> rows, active, borderline;  // per unit; per (unit, neuron)
  int64_t misrouted = 0;
  float max_gate_error = 0.0f;

 private:
  const Model& m_;
  FfnObserver& inner_;
};

test::MoeModelSpec profiled_spec() {
  test::MoeModelSpec spec;
  spec.activation = "drelu";
  spec.down = false;
  spec.down_t = true;
  spec.n_ff = 128;
  spec.predictor_rank = 128;
  spec.exact_predictor = true;
  return spec;
}

}  // namespace

TEST_CASE("MoE profile: a unit per (layer, expert), joint frequencies equal a brute-force count") {
  const test::MoeModelSpec spec = profiled_spec();
  test::RemoveOnExit file{test::write_moe_model(spec, "moe-profile")};
  auto model = Model::load(file.path.string());
  const ModelConfig& c = model->config();
  const int64_t X = c.n_expert, k = c.n_expert_used, F = c.n_ff;
  ThreadPool pool(2);
  ContextOptions o;
  o.n_ctx = 128;
  o.max_batch = 16;
  ActivationProfiler profiler(profiler_setup_for(*model, o.max_batch), pool.size());
  BruteForce brute(*model, profiler);
  RoutingStats routes(c.n_layer, X, k);
  o.ffn_observer = &brute;
  o.moe_observer = &routes;
  InferenceContext ctx(*model, pool, o);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(1 + (i * 37 + 11) % 290);
  ctx.eval(prompt);  // batches of 16, 16, 8
  for (int32_t t : {5, 77, 140, 230}) ctx.eval(std::vector<int32_t>{t});  // decode steps
  const uint64_t tokens = 44;
  REQUIRE(routes.layers()[0].tokens == tokens);

  const ActivationProfile p = moe_activation_profile(profiler, X, tokens);
  CHECK(p.tokens == tokens);
  CHECK(p.n_expert == X);
  REQUIRE(p.layers.size() == static_cast<size_t>(c.n_layer * X));
  CHECK(brute.misrouted == 0);
  CHECK(brute.max_gate_error < 1e-3f);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    uint64_t routed = 0;
    int used = 0;
    for (int64_t e = 0; e < X; ++e) {
      const int64_t u = l * X + e;
      CHECK(profiler.tokens(u) == brute.rows[static_cast<size_t>(u)]);
      CHECK(profiler.tokens(u) == routes.layers()[static_cast<size_t>(l)].expert_slots[static_cast<size_t>(e)]);
      routed += profiler.tokens(u);
      used += profiler.tokens(u) > 0;
      for (int64_t i = 0; i < F; ++i) {
        const size_t n = at(u, i, F);
        const double count = static_cast<double>(p.layers[static_cast<size_t>(u)].frequency[static_cast<size_t>(i)]) * tokens;
        CHECK(std::fabs(count - static_cast<double>(brute.active[n])) <= 1e-3 + static_cast<double>(brute.borderline[n]));
      }
      if (profiler.tokens(u) == 0) continue;
      // Conditional on the routing: the exact predictor (the gate's sign) misses nothing; dReLU on
      // random weights fires a quarter of a routed expert's neurons.
      const LayerActivationProfile& lp = p.layers[static_cast<size_t>(u)];
      CHECK(lp.predictor_recall >= 0.999);
      CHECK(lp.active_fraction == doctest::Approx(0.25).epsilon(0.4));
    }
    CHECK(routed == static_cast<uint64_t>(k) * tokens);
    CHECK(used >= 3);  // varied routing
  }
}

TEST_CASE("MoE profile files keep n_expert; profiles fit only models of their kind") {
  const test::MoeModelSpec spec = profiled_spec();
  test::RemoveOnExit file{test::write_moe_model(spec, "moe-profile-file")};
  auto model = Model::load(file.path.string());
  const ModelConfig& c = model->config();
  ThreadPool pool(2);
  ContextOptions o;
  o.n_ctx = 64;
  ActivationProfiler profiler(profiler_setup_for(*model, o.max_batch), pool.size());
  o.ffn_observer = &profiler;
  InferenceContext ctx(*model, pool, o);
  ctx.eval(std::vector<int32_t>{1, 270, 280, 290, 271, 12, 13, 14});
  const ActivationProfile p = moe_activation_profile(profiler, c.n_expert, 8);
  const std::string path = (std::filesystem::temp_directory_path() / ("ember_moe_profile_" + std::to_string(getpid()))).string();
  save_activation_profile(p, path);
  const ActivationProfile q = load_activation_profile(path);
  std::filesystem::remove(path);
  CHECK(q.n_expert == c.n_expert);
  CHECK(q.tokens == 8);
  REQUIRE(q.layers.size() == p.layers.size());
  for (size_t u = 0; u < q.layers.size(); ++u) CHECK(q.layers[u].frequency == p.layers[u].frequency);
  CHECK_NOTHROW(check_profile_matches(q, c.n_layer, c.n_ff, c.n_expert));
  // A dense model of as many layers as the profile has units is not a mixture of experts.
  CHECK_THROWS_WITH_AS(check_profile_matches(q, c.n_layer * c.n_expert, c.n_ff, 0), doctest::Contains("a dense FFN"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(check_profile_matches(q, c.n_layer, c.n_ff, c.n_expert * 2), doctest::Contains("experts"),
                       std::invalid_argument);
  ActivationProfile dense = p;
  dense.n_expert = 0;
  CHECK_THROWS_WITH_AS(check_profile_matches(dense, c.n_layer, c.n_ff, c.n_expert), doctest::Contains("a dense FFN"),
                       std::invalid_argument);
  // n_layer must hold whole layers of units.
  ActivationProfile odd = p;
  odd.n_expert = 3;
  save_activation_profile(odd, path);
  CHECK_THROWS_WITH(load_activation_profile(path), doctest::Contains("ember.profile.n_expert"));
  std::filesystem::remove(path);
  // Units that are not whole layers of experts, or that saw more tokens than were profiled.
  CHECK_THROWS_AS(moe_activation_profile(profiler, 3, 8), std::invalid_argument);
  CHECK_THROWS_AS(moe_activation_profile(profiler, c.n_expert, 1), std::invalid_argument);
}

}  // namespace ember
