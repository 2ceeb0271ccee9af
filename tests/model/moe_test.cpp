// Mixture-of-experts models: Mixtral's gating, the MoE FFN against a scalar reference, both file
// layouts, prompt batches against single tokens, and every defect of an MoE file refused by name.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/matmul.h"
#include "core/kernels/type_traits.h"
#include "core/model/ffn_moe.h"
#include "core/model/generator.h"
#include "core/model/moe_router.h"
#include "core/sparse/ffn_activation.h"
#include "tests/model/moe_model_builder.h"

namespace ember {
namespace {

std::string load_error(const test::MoeModelSpec& spec) {
  test::RemoveOnExit file{test::write_moe_model(spec, "moe-broken")};
  try {
    Model::load(file.path.string());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::vector<float> logits_of(const Model& model, const std::vector<int32_t>& prompt, int64_t max_batch = 512) {
  ThreadPool pool(2);
  ContextOptions o;
  o.max_batch = max_batch;
  InferenceContext ctx(model, pool, o);
  const float* l = ctx.eval(prompt);
  return std::vector<float>(l, l + model.config().n_vocab);
}

// One expert's FFN for one token, from the reference matmul (which rounds x as the kernels do).
std::vector<float> expert_reference(const ExpertWeights& ex, const float* x, int64_t E, int64_t F) {
  std::vector<float> g(static_cast<size_t>(F)), u(static_cast<size_t>(F)), y(static_cast<size_t>(E));
  matmul_reference(ex.gate, x, 1, E, g.data(), F);
  matmul_reference(ex.up, x, 1, E, u.data(), F);
  for (int64_t i = 0; i < F; ++i) g[static_cast<size_t>(i)] = neuron_activation(FfnActivation::SiLU, g[static_cast<size_t>(i)], u[static_cast<size_t>(i)]);
  matmul_reference(ex.down, g.data(), 1, F, y.data(), E);
  return y;
}

class Recorder : public MoeRouteObserver {
 public:
  void on_routed(int64_t, int64_t n, int64_t k, const int32_t* chosen, const float*) override {
    ids.assign(chosen, chosen + n * k);
  }
  std::vector<int32_t> ids;
};

}  // namespace

TEST_CASE("gating: softmax, top k, weights renormalised over the k") {
  const float logits[] = {0.5f, 2.0f, -1.0f, 1.0f};
  int32_t chosen[2];
  float w[2];
  route_token(logits, 4, 2, chosen, w);
  CHECK(chosen[0] == 1);
  CHECK(chosen[1] == 3);
  // softmax(2, 1) over the chosen: e^2 / (e^2 + e^1)
  CHECK(w[0] == doctest::Approx(std::exp(2.0) / (std::exp(2.0) + std::exp(1.0))));
  CHECK(w[0] + w[1] == doctest::Approx(1.0f));
  route_token(logits, 4, 1, chosen, w);
  CHECK(chosen[0] == 1);
  CHECK(w[0] == 1.0f);
  const float ties[] = {1.0f, 3.0f, 3.0f, 3.0f};
  int32_t three[3];
  float w3[3];
  route_token(ties, 4, 3, three, w3);
  CHECK(three[0] == 1);
  CHECK(three[1] == 2);
  CHECK(three[2] == 3);
  for (float x : w3) CHECK(x == doctest::Approx(1.0f / 3.0f));
  const float nan_logits[] = {NAN, NAN, NAN};
  int32_t two[2];
  route_token(nan_logits, 3, 2, two, w);
  CHECK(two[0] != two[1]);  // still k distinct experts
}

TEST_CASE("the MoE FFN equals a scalar reference, for a batch and for one token") {
  for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_0}) {
    CAPTURE(type_name(type));
    test::MoeModelSpec spec;
    spec.matrix_type = type;
    spec.n_embd = 64;
    spec.n_ff = 64;
    test::RemoveOnExit file{test::write_moe_model(spec, "moe-ffn")};
    ModelLoadOptions lo;
    lo.repack = false;
    auto model = Model::load(file.path.string(), lo);
    const ModelConfig& c = model->config();
    const int64_t E = c.n_embd, F = c.n_ff, n = 7;
    ThreadPool pool(2);
    MatmulScratch mm;
    mm.reserve(n, std::max(E, F));
    std::vector<float> gate(static_cast<size_t>(n * F)), up(gate.size());
    Recorder routes;
    MoeFfn ffn(FfnEnv{c, model->weights(), pool, mm, gate, up}, &routes);
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    std::vector<float> x(static_cast<size_t>(n * E));
    for (float& v : x) v = normal(rng);
    for (const int64_t tokens : {n, int64_t{1}}) {
      std::vector<float> out(static_cast<size_t>(tokens * E), 99.0f);
      FfnStepReport report;
      ffn.run(1, FfnIo{x.data(), x.data(), tokens, out.data()}, report);
      const LayerWeights& L = model->weights().layers[1];
      std::vector<int> used(static_cast<size_t>(c.n_expert), 0);
      for (int64_t t = 0; t < tokens; ++t) {
        std::vector<float> logits(static_cast<size_t>(c.n_expert));
        matmul_reference(L.ffn_gate_inp, &x[static_cast<size_t>(t * E)], 1, E, logits.data(), c.n_expert);
        int32_t chosen[2];
        float w[2];
        route_token(logits.data(), c.n_expert, 2, chosen, w);
        CHECK(routes.ids[static_cast<size_t>(t * 2)] == chosen[0]);
        CHECK(routes.ids[static_cast<size_t>(t * 2 + 1)] == chosen[1]);
        std::vector<float> expected(static_cast<size_t>(E), 0.0f);
        for (int j = 0; j < 2; ++j) {
          ++used[static_cast<size_t>(chosen[j])];
          const auto y = expert_reference(L.experts[static_cast<size_t>(chosen[j])], &x[static_cast<size_t>(t * E)], E, F);
          for (int64_t d = 0; d < E; ++d) expected[static_cast<size_t>(d)] += w[j] * y[static_cast<size_t>(d)];
        }
        for (int64_t d = 0; d < E; ++d)
          CHECK(out[static_cast<size_t>(t * E + d)] == doctest::Approx(expected[static_cast<size_t>(d)]).epsilon(1e-3));
      }
      if (tokens == n) CHECK(std::count(used.begin(), used.end(), 0) < c.n_expert - 2);  // varied routing
    }
  }
}

TEST_CASE("stacked and per-expert files of the same model give the same logits") {
  test::MoeModelSpec spec;
  test::RemoveOnExit stacked{test::write_moe_model(spec, "moe-stacked")};
  spec.stacked = false;
  test::RemoveOnExit per_expert{test::write_moe_model(spec, "moe-per-expert")};
  const std::vector<int32_t> prompt = {1, 270, 280, 290, 271, 299, 265};
  CHECK(logits_of(*Model::load(stacked.path.string()), prompt) == logits_of(*Model::load(per_expert.path.string()), prompt));
}

TEST_CASE("each part of the experts may be stacked or per expert, the model is the same") {
  test::MoeModelSpec spec;
  spec.predictor_rank = 16;
  spec.down_t = true;
  test::RemoveOnExit stacked{test::write_moe_model(spec, "moe-stacked")};
  spec.unstack_tensor = "blk.0.ffn_gate_exps.weight";  // per-expert gate in layer 0, the rest stacked
  test::RemoveOnExit mixed{test::write_moe_model(spec, "moe-mixed")};
  auto a = Model::load(stacked.path.string()), b = Model::load(mixed.path.string());
  CHECK(a->weights().has_predictor());
  CHECK(a->weights().has_down_t());
  CHECK(a->weights().max_predictor_rank() == 16);
  const std::vector<int32_t> prompt = {1, 270, 280, 290};
  CHECK(logits_of(*a, prompt) == logits_of(*b, prompt));
}

TEST_CASE("a file with the down projection only neuron-major (down_t) computes the same FFN") {
  test::MoeModelSpec spec;
  spec.down_t = true;
  test::RemoveOnExit both{test::write_moe_model(spec, "moe-down-both")};
  spec.down = false;
  test::RemoveOnExit only_t{test::write_moe_model(spec, "moe-down-t")};
  const std::vector<int32_t> prompt = {1, 270, 280, 290, 271};
  const auto a = logits_of(*Model::load(both.path.string()), prompt);
  const auto b = logits_of(*Model::load(only_t.path.string()), prompt);
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-4));
}

TEST_CASE("k identical experts are the dense FFN they copy") {
  test::MoeModelSpec spec;
  spec.identical_experts = true;
  test::RemoveOnExit moe{test::write_moe_model(spec, "moe-identical")};
  spec.dense_ffn = true;
  test::RemoveOnExit dense{test::write_moe_model(spec, "moe-as-dense")};
  const std::vector<int32_t> prompt = {1, 270, 280, 290, 271};
  const auto a = logits_of(*Model::load(moe.path.string()), prompt);
  const auto b = logits_of(*Model::load(dense.path.string()), prompt);
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-4));
}

TEST_CASE("a prompt batch grouped by expert equals the tokens one at a time") {
  for (const GgmlType type : {GgmlType::F32, GgmlType::Q4_0}) {
    CAPTURE(type_name(type));
    test::MoeModelSpec spec;
    spec.matrix_type = type;
    spec.n_embd = 64;
    spec.n_ff = 64;
    test::RemoveOnExit file{test::write_moe_model(spec, "moe-batch")};
    auto model = Model::load(file.path.string());
    const std::vector<int32_t> prompt = {1, 270, 280, 290, 271, 299, 265, 14, 15, 92};
    const auto batched = logits_of(*model, prompt);
    const auto single = logits_of(*model, prompt, 1);
    for (size_t i = 0; i < batched.size(); ++i) CHECK(single[i] == doctest::Approx(batched[i]).epsilon(1e-3));
  }
}

TEST_CASE("an MoE model generates greedily and refuses what it does not support yet") {
  test::RemoveOnExit file{test::write_moe_model({}, "moe-generate")};
  auto model = Model::load(file.path.string());
  CHECK(model->config().n_expert == 4);
  CHECK(model->config().n_expert_used == 2);
  ThreadPool pool(2);
  ContextOptions sparse;
  sparse.sparse.mode = SparseOptions::Mode::Oracle;  // SiLU experts, no down_t
  CHECK_THROWS_AS(InferenceContext(*model, pool, sparse), std::invalid_argument);
  ModelLoadOptions budget;
  budget.offload.budget_bytes = 1 << 20;
  CHECK_THROWS_WITH(Model::load(file.path.string(), budget), doctest::Contains("pack"));
}

TEST_CASE("defects of an MoE file are refused with the key or tensor named") {
  test::MoeModelSpec s;
  s.expert_used_key = 0;
  CHECK(load_error(s).find("llama.expert_used_count") != std::string::npos);
  s = {};
  s.expert_used_key = 5;  // of 4
  CHECK(load_error(s).find("llama.expert_used_count': 5 is outside [1, 4]") != std::string::npos);
  s = {};
  s.expert_count_key = 1000;
  CHECK(load_error(s).find("llama.expert_count") != std::string::npos);
  s = {};
  s.expert_count_key = 0;  // experts in the file, none in the metadata: a used count without a count
  CHECK(load_error(s).find("llama.expert_used_count") != std::string::npos);
  s = {};
  s.skip_tensor = "blk.1.ffn_gate_inp.weight";
  CHECK(load_error(s).find("'blk.1.ffn_gate_inp.weight' is missing") != std::string::npos);
  s = {};
  s.reshape_tensor = "blk.0.ffn_up_exps.weight";
  CHECK(load_error(s).find("'blk.0.ffn_up_exps.weight': shape {64, 96, 5}, expected {64, 96, 4}") != std::string::npos);
  s = {};
  s.skip_tensor = "blk.0.ffn_down_exps.weight";
  CHECK(load_error(s).find("'blk.0.ffn_down_exps.weight' is missing") != std::string::npos);
  s = {};
  s.reshape_tensor = "blk.1.fc2_exps.weight";
  s.predictor_rank = 16;
  CHECK(load_error(s).find("'blk.1.fc2_exps.weight': shape {16, 96, 5}, expected {16, 96, 4}") != std::string::npos);
  s = {};
  s.predictor_rank = 16;
  s.fc2_rank = 8;
  CHECK(load_error(s).find("'blk.0.fc2_exps.weight': shape {8, 96, 4}, expected {16, 96, 4}") != std::string::npos);
  s = {};
  s.predictor_rank = 16;
  s.stacked = false;
  s.skip_tensor = "blk.1.fc2.2.weight";
  CHECK(load_error(s).find("'blk.1.fc2.2.weight' is missing: an expert's predictor needs both") != std::string::npos);
  s = {};
  s.predictor_rank = 16;
  s.stacked = false;
  s.skip_tensor = "blk.1.fc1.3.weight";
  s.fc2_rank = 16;
  CHECK(load_error(s).find("'blk.1.fc1.3.weight' is missing") != std::string::npos);
  s = {};
  s.down = false;  // neither ffn_down nor ffn_down_t
  CHECK(load_error(s).find("'blk.0.ffn_down_exps.weight' is missing") != std::string::npos);
  s = {};
  s.stacked = false;
  s.skip_tensor = "blk.1.ffn_up.3.weight";
  CHECK(load_error(s).find("'blk.1.ffn_up.3.weight' is missing") != std::string::npos);
  s = {};
  s.stacked = false;
  s.reshape_tensor = "blk.0.ffn_down.2.weight";
  CHECK(load_error(s).find("'blk.0.ffn_down.2.weight': shape {96, 65}, expected {96, 64}") != std::string::npos);
  s = {};
  s.reshape_tensor = "blk.0.ffn_gate_inp.weight";
  CHECK(load_error(s).find("'blk.0.ffn_gate_inp.weight': shape {64, 5}, expected {64, 4}") != std::string::npos);
}

}  // namespace ember

