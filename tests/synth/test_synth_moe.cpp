// Mixture-of-experts synthetic models: llama.cpp's MoE llama layout (as Mixtral's GGUF files),
// the router's rows, and the routing statistics they produce (F32 reference pass of
// sparse_reference.h on a successor-chain text).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/synth/router_design.h"
#include "core/synth/synth_shape.h"
#include "core/synth/synth_weights.h"
#include "core/synth/synth_writer.h"
#include "tests/synth/ffn_stats.h"
#include "tests/synth/router_stats.h"
#include "tests/synth/sparse_reference.h"
#include "tests/synth/synth_files.h"

using namespace ember;
using namespace ember::synth;

namespace {

SynthOptions moe_options(const std::string& name, GgmlType type, uint64_t seed, int threads = 2) {
  SynthOptions o = test::test_options("moe-tiny", "moe_" + name, type, seed);
  o.threads = threads;
  return o;
}

std::string write_moe(const std::string& name, GgmlType type, uint64_t seed, int threads = 2) {
  const auto o = moe_options(name, type, seed, threads);
  write_synth_model(o);
  return o.output_path;
}

using ember::test::fnv1a;

}  // namespace

TEST_CASE("MoE presets have Mixtral's layout and parameter counts") {
  const auto names = preset_names();
  for (const char* p : {"moe-tiny", "moe-mid", "mixtral-8x7b"})
    CHECK(std::find(names.begin(), names.end(), p) != names.end());
  const auto mixtral = preset_shape("mixtral-8x7b");
  CHECK(mixtral.n_experts == 8);
  CHECK(mixtral.n_experts_used == 2);
  CHECK(mixtral.rope_theta == 1e6f);
  CHECK(parameter_count(mixtral) > 46'600'000'000ull);
  CHECK(parameter_count(mixtral) < 46'800'000'000ull);
  const auto mid = preset_shape("moe-mid");
  CHECK(parameter_count(mid) > 600'000'000ull);
  CHECK(parameter_count(mid) < 700'000'000ull);
  CHECK(preset_shape("mistral-7b").n_experts == 0);

  const auto tiny = preset_shape("moe-tiny");
  // Routers and all experts count: 4 x (3 x 256 x 512 x 8 + 256 x 8) more than one dense FFN of 512.
  ModelShape dense = tiny;
  dense.n_experts = dense.n_experts_used = 0;
  CHECK(parameter_count(tiny) - parameter_count(dense) == 2ull * (3 * 256 * 512 * 7 + 256 * 8));
  const auto t = model_tensors(tiny);
  REQUIRE(t.size() == 1 + 2 * 10 + 2);
  CHECK(t[6].name == "blk.0.ffn_norm.weight");
  CHECK(t[7].name == "blk.0.ffn_gate_inp.weight");
  CHECK(t[7].role == TensorRole::Router);
  CHECK(t[8].name == "blk.0.ffn_gate_exps.weight");
  CHECK(t[8].role == TensorRole::FfnGate);
  CHECK(t[9].name == "blk.0.ffn_down_exps.weight");
  CHECK(t[9].std_scale == doctest::Approx(0.5f));  // the residual scale 1/sqrt(2 n_layers), as dense ffn_down
  CHECK(t[10].name == "blk.0.ffn_up_exps.weight");

  ModelShape bad = tiny;
  bad.n_experts_used = 9;
  CHECK_THROWS_AS(model_tensors(bad), std::invalid_argument);
}

TEST_CASE("moe-tiny is a llama GGUF with expert metadata, stacked experts and an F32 router") {
  const auto path = write_moe("meta.gguf", GgmlType::Q4_0, 1);
  const auto f = gguf::GgufFile::open(path);
  const auto& md = f.metadata();
  CHECK(md.get_string("general.architecture") == "llama");
  CHECK(md.get_uint("llama.expert_count") == 8u);
  CHECK(md.get_uint("llama.expert_used_count") == 2u);
  CHECK(md.get_uint("llama.feed_forward_length") == 512u);
  CHECK(md.get_uint("llama.embedding_length") == 256u);
  CHECK(f.tensors().size() == 1 + 2 * 10 + 2);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    CHECK(f.find_tensor(p + "ffn_gate.weight") == nullptr);
    CHECK(f.find_tensor(p + "ffn_up.weight") == nullptr);
    CHECK(f.find_tensor(p + "ffn_down.weight") == nullptr);
    const auto* router = f.find_tensor(p + "ffn_gate_inp.weight");
    REQUIRE(router != nullptr);
    CHECK(router->type == GgmlType::F32);
    CHECK(router->n_dims == 2);
    CHECK(router->ne[0] == 256);
    CHECK(router->ne[1] == 8);
    for (const char* name : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
      const auto* e = f.find_tensor(p + name + ".weight");
      REQUIRE(e != nullptr);
      CHECK(e->type == GgmlType::Q4_0);
      CHECK(e->n_dims == 3);
      const bool down = std::string(name) == "ffn_down_exps";
      CHECK(e->ne[0] == (down ? 512u : 256u));
      CHECK(e->ne[1] == (down ? 256u : 512u));
      CHECK(e->ne[2] == 8);
    }
  }
  std::filesystem::remove(path);

  // Dense presets state no expert keys.
  SynthOptions dense = moe_options("dense.gguf", GgmlType::Q8_0, 0);
  dense.preset = "tiny";
  write_synth_model(dense);
  const auto d = gguf::GgufFile::open(dense.output_path);
  CHECK_FALSE(d.metadata().get_uint("llama.expert_count").has_value());
  CHECK(d.find_tensor("blk.0.ffn_gate_inp.weight") == nullptr);
  std::filesystem::remove(dense.output_path);
}

// F32: no quantizer, so the bytes are the synth code's alone. Dense models, sparse or not, are
// what they were before the MoE presets; SiLU mixtures what they were before sparse experts.
TEST_CASE("dense models and SiLU mixtures keep their bytes") {
  struct Case { const char* preset; FfnActivation act; uint64_t hash; };
  for (const Case& c : {Case{"tiny", FfnActivation::SiLU, 0xc222e71ea7b0b119ull},
                        Case{"tiny", FfnActivation::DReLU, 0x4f5b01ea4e6badd5ull},
                        Case{"moe-tiny", FfnActivation::SiLU, 0x3124b913f2959eacull}}) {
    CAPTURE(c.preset);
    CAPTURE(activation_key_value(c.act));
    SynthOptions o = moe_options("hash_f32.gguf", GgmlType::F32, 4);
    o.preset = c.preset;
    o.activation = c.act;
    o.predictor = o.down_transposed = c.act != FfnActivation::SiLU;
    write_synth_model(o);
    CHECK(fnv1a(ember::test::file_bytes(o.output_path)) == c.hash);
    std::filesystem::remove(o.output_path);
  }
}

TEST_CASE("moe-tiny: same seed gives the same bytes whatever the threads; another seed differs") {
  ember::test::check_seed_determinism("moe-tiny", 7000000);
}

TEST_CASE("experts are distinct draws with the dense roles' scales") {
  const auto t = model_tensors(preset_shape("moe-tiny"));
  const TensorSpec& gate = t[8];
  const uint64_t n = gate.ne[0], rows_per_expert = gate.ne[1];
  std::vector<float> e0(n), e1(n);
  generate_rows(gate, 0, 0, 1, e0.data());                            // expert 0, neuron 0
  generate_rows(gate, 0, rows_per_expert, rows_per_expert + 1, e1.data());  // expert 1, neuron 0
  CHECK(e0 != e1);
  const TensorSpec& down = t[9];
  std::vector<float> rows(4 * down.ne[0]);
  generate_rows(down, 0, 3 * down.ne[1], 3 * down.ne[1] + 4, rows.data());  // expert 3
  double sq = 0;
  for (float x : rows) sq += double(x) * x;
  CHECK(std::sqrt(sq / double(rows.size())) == doctest::Approx(weight_std(down)).epsilon(0.05));
}

TEST_CASE("router rows have the design's norm and ignore the layer's constant direction") {
  const auto t = model_tensors(preset_shape("moe-tiny"));
  const TensorSpec& router = t[7];
  const TensorSpec& norm = t[6];
  std::vector<float> rows(8 * 256), part(3 * 256), w(256);
  generate_rows(router, 9, 0, 8, rows.data());
  generate_rows(router, 9, 5, 8, part.data());
  CHECK(std::equal(part.begin(), part.end(), rows.begin() + 5 * 256));
  generate_rows(norm, 9, 0, 1, w.data());
  for (int e = 0; e < 8; ++e) {
    double len = 0, along_w = 0, slow = 0;
    for (int i = 0; i < 256; ++i) {
      const double v = rows[e * 256 + i];
      len += v * v, along_w += v * w[i], slow += (i % 2 == 1) ? v * v : 0.0;
    }
    CHECK(std::sqrt(len) == doctest::Approx(kRouterLogitStd).epsilon(1e-4));
    CHECK(std::abs(along_w) < 1e-4);
    CHECK(slow / len == doctest::Approx(kRouterSlowShare).epsilon(0.05));
  }
}

TEST_CASE("moe-tiny routes evenly, neither flat nor one-hot, with modest locality") {
  const auto path = write_moe("route.gguf", GgmlType::Q8_0, 0);
  const auto f = gguf::GgufFile::open(path);
  const auto trace = test::trace_ffn(f, test::chain_text(400, 1024));
  REQUIRE(trace.router.size() == 2);
  for (size_t l = 0; l < trace.router.size(); ++l) {
    CAPTURE(l);
    REQUIRE(trace.router[l].size() == 400);
    const auto s = test::router_stats(trace.router[l], 2);
    CHECK(s.min_load > 0.6);  // 800 picks: an even 100 per expert, +-10 by chance alone
    CHECK(s.max_load < 1.4);
    CHECK(s.top1_prob > 0.4);
    CHECK(s.top1_prob < 0.6);
    CHECK(s.repeat_first > 0.16);  // chance: 1/8
    CHECK(s.repeat_first < 0.35);
    CHECK(s.bias_ratio < 0.2);
  }
  std::filesystem::remove(path);
}

TEST_CASE("SiLU mixtures refuse the sparse-only options, as dense SiLU models do") {
  for (int variant = 0; variant < 3; ++variant) {
    SynthOptions o = moe_options("never.gguf", GgmlType::Q8_0, 0);
    if (variant == 0) o.predictor = true;
    if (variant == 1) o.down_transposed = true;
    if (variant == 2) o.predictor_rank = 64;
    CAPTURE(variant);
    CHECK_THROWS_AS(write_synth_model(o), std::invalid_argument);
    CHECK_FALSE(std::filesystem::exists(o.output_path));
  }
}
