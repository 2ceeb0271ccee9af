// Mixtures of sparse experts (`--activation relu|drelu [--predictor]` on the MoE presets): every
// expert a sparse FFN of the dense sparse design, with its own power law and predictor; the file
// layout the engine reads; and the sparsity, predictability and routing measured by the F32
// reference pass of sparse_reference.h on a successor-chain text, per expert on the positions
// routed to it.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/synth/sparse_design.h"
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

SynthOptions sparse_moe(const std::string& name, FfnActivation act, GgmlType type, bool predictor) {
  return test::test_options("moe-tiny", "moe_sparse_" + name, type, 0, act, predictor);
}

SparseParams drelu_params(bool predictor) {
  SparseParams p;
  p.activation = FfnActivation::DReLU;
  p.predictor = predictor;
  return p;
}

const TensorSpec& find_spec(const std::vector<TensorSpec>& t, const std::string& name) {
  const auto it = std::find_if(t.begin(), t.end(), [&](const TensorSpec& s) { return s.name == name; });
  REQUIRE(it != t.end());
  return *it;
}

}  // namespace

TEST_CASE("sparse moe-tiny has the stacked sparse tensors and no ffn_down_exps") {
  const auto o = sparse_moe("layout.gguf", FfnActivation::DReLU, GgmlType::Q8_0, true);
  write_synth_model(o);
  const auto f = gguf::GgufFile::open(o.output_path);
  const auto& md = f.metadata();
  CHECK(md.get_string("llama.ffn_activation") == "drelu");
  CHECK(md.get_uint("llama.expert_count") == 8u);
  CHECK(md.get_uint("llama.expert_used_count") == 2u);
  CHECK(md.get_float("powerinfer.sparse_threshold") == 0.0);
  CHECK(f.is_powerinfer());
  std::set<std::string> names;
  for (const auto& t : f.tensors()) names.insert(t.name);
  std::set<std::string> expected{"token_embd.weight", "output_norm.weight", "output.weight"};
  struct Shape { const char* name; GgmlType type; std::vector<uint64_t> ne; };
  const std::vector<Shape> ffn{{"ffn_gate_inp", GgmlType::F32, {256, 8}},
                               {"ffn_gate_exps", GgmlType::Q8_0, {256, 512, 8}},
                               {"ffn_up_exps", GgmlType::Q8_0, {256, 512, 8}},
                               {"ffn_down_t_exps", GgmlType::Q8_0, {256, 512, 8}},
                               {"fc1_exps", GgmlType::F16, {256, 32, 8}},
                               {"fc2_exps", GgmlType::F16, {32, 512, 8}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const char* n : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm"})
      expected.insert(p + n + ".weight");
    for (const auto& s : ffn) {
      CAPTURE(s.name);
      expected.insert(p + s.name + ".weight");
      const auto* t = f.find_tensor(p + s.name + ".weight");
      REQUIRE(t != nullptr);
      CHECK(t->type == s.type);
      REQUIRE(t->n_dims == s.ne.size());
      for (size_t d = 0; d < s.ne.size(); ++d) CHECK(t->ne[d] == s.ne[d]);
    }
  }
  CHECK(names == expected);  // in particular no ffn_down_exps, ffn_down_t or dense fc1 / fc2
  std::filesystem::remove(o.output_path);

  // ReLU without a predictor: down_t_exps still, no predictors, no PWRI.
  const auto r = sparse_moe("relu_layout.gguf", FfnActivation::ReLU, GgmlType::Q8_0, false);
  write_synth_model(r);
  const auto g = gguf::GgufFile::open(r.output_path);
  CHECK(g.metadata().get_string("llama.ffn_activation") == "relu");
  CHECK(g.find_tensor("blk.1.ffn_down_t_exps.weight") != nullptr);
  CHECK(g.find_tensor("blk.1.ffn_down_exps.weight") == nullptr);
  CHECK(g.find_tensor("blk.1.fc1_exps.weight") == nullptr);
  CHECK_FALSE(g.is_powerinfer());
  std::filesystem::remove(r.output_path);
}

TEST_CASE("--down-transposed is implied for sparse mixtures; the bytes do not depend on threads") {
  auto o = sparse_moe("implied.gguf", FfnActivation::DReLU, GgmlType::Q8_0, true);
  write_synth_model(o);
  const auto plain = test::file_bytes(o.output_path);
  o.down_transposed = true;
  write_synth_model(o);
  CHECK(test::file_bytes(o.output_path) == plain);
  std::filesystem::remove(o.output_path);
  test::check_seed_determinism("moe-tiny", 7000000, FfnActivation::DReLU, true);
}

TEST_CASE("ffn_down_t_exps is exactly the transpose of the ffn_down_exps the design would draw") {
  const auto t = model_tensors(preset_shape("moe-tiny"), drelu_params(false));
  const TensorSpec& down_t = find_spec(t, "blk.1.ffn_down_t_exps.weight");
  TensorSpec down = down_t;
  down.name = "blk.1.ffn_down_exps.weight";
  down.role = TensorRole::FfnDown;
  down.ne = {512, 256, 8};
  // Expert 3 in full; a slice starting inside expert 2 and ending inside expert 4 for down_t.
  std::vector<float> d(256 * 512), dt((512 + 2 * 100) * 256);
  generate_rows(down, 2, 3 * 256, 4 * 256, d.data());
  generate_rows(down_t, 2, 3 * 512 - 100, 4 * 512 + 100, dt.data());
  for (int64_t i = 0; i < 512; ++i)
    for (int64_t k = 0; k < 256; ++k) REQUIRE(dt[(100 + i) * 256 + k] == d[k * 512 + i]);
  for (int64_t i = 0; i < 512; ++i) CHECK(dt[(100 + i) * 256 + kBiasChannel] == 0.0f);  // nothing writes there
  // Experts differ.
  CHECK(!std::equal(dt.begin(), dt.begin() + 100 * 256, dt.begin() + 100 * 256));
}

TEST_CASE("every expert has its own power law and gates; routers ignore the bias channel") {
  SparseParams p = drelu_params(true);
  const auto t = model_tensors(preset_shape("moe-tiny"), p);
  p = find_spec(t, "blk.0.ffn_gate_exps.weight").sparse;  // dim, n_ff, rank filled in
  const auto dense = target_frequencies(p, FfnUnit{0, -1}), e0 = target_frequencies(p, FfnUnit{0, 0}),
             e1 = target_frequencies(p, FfnUnit{0, 1});
  CHECK(e0 != e1);
  CHECK(e0 != dense);
  auto sorted0 = e0, sorted1 = e1;  // the same law (up to the rounding of its scale), another permutation
  std::sort(sorted0.begin(), sorted0.end());
  std::sort(sorted1.begin(), sorted1.end());
  for (size_t i = 0; i < sorted0.size(); ++i) REQUIRE(sorted0[i] == doctest::Approx(sorted1[i]).epsilon(1e-9));

  const TensorSpec& gate = find_spec(t, "blk.0.ffn_gate_exps.weight");
  std::vector<float> g(2 * 256);
  generate_rows(gate, 0, 0, 1, g.data());
  generate_rows(gate, 0, 512, 513, g.data() + 256);
  CHECK(!std::equal(g.begin(), g.begin() + 256, g.begin() + 256));
  CHECK(g[kBiasChannel] < 0.0f);  // the per-neuron bias
  CHECK(g[256 + kBiasChannel] < 0.0f);

  const TensorSpec& router = find_spec(t, "blk.1.ffn_gate_inp.weight");
  std::vector<float> r(8 * 256);
  generate_rows(router, 0, 0, 8, r.data());
  for (int e = 0; e < 8; ++e) CHECK(r[e * 256 + kBiasChannel] == 0.0f);
}

// The sparsity measured by real arithmetic on the written weights, per expert on the positions
// routed to it (800 picks over 8 experts: ~100 tokens each).
TEST_CASE("sparse experts are ~90% sparse and predictable, and every expert is routed") {
  struct Case { FfnActivation act; GgmlType type; std::string name; };
  for (const Case& c : {Case{FfnActivation::DReLU, GgmlType::Q8_0, "drelu Q8_0"},
                        Case{FfnActivation::DReLU, GgmlType::Q4_0, "drelu Q4_0"},
                        Case{FfnActivation::ReLU, GgmlType::Q8_0, "relu Q8_0"}}) {
    CAPTURE(c.name);
    const auto o = sparse_moe("measure.gguf", c.act, c.type, true);
    write_synth_model(o);
    const auto f = gguf::GgufFile::open(o.output_path);
    const auto tr = test::trace_ffn(f, test::chain_text(400, 1024));
    REQUIRE(tr.experts.size() == 2);
    for (size_t l = 0; l < tr.experts.size(); ++l) {
      CAPTURE(l);
      const auto rs = test::router_stats(tr.router[l], 2);
      MESSAGE(c.name << " layer " << l << ": load " << rs.min_load << " / " << rs.max_load << ", top-1 p "
                     << rs.top1_prob << ", first choice repeated " << rs.repeat_first);
      CHECK(rs.min_load > 0.6);
      CHECK(rs.max_load < 1.4);
      CHECK(rs.repeat_first > 0.16);
      CHECK(rs.bias_ratio < 0.2);
      for (size_t e = 0; e < 8; ++e) {
        CAPTURE(e);
        const auto x = test::expert_stats(tr, l, e, c.act == FfnActivation::DReLU);
        REQUIRE(x.routed);
        MESSAGE(c.name << " layer " << l << " expert " << e << " (" << x.tokens << " tokens): active "
                       << 1.0 - x.s.inactive << ", hot-20% share " << x.s.hot20_share << ", recall " << x.s.recall
                       << ", precision " << x.s.precision);
        CHECK(1.0 - x.s.inactive > 0.08);
        CHECK(1.0 - x.s.inactive < 0.2);
        CHECK(x.s.hot20_share >= 0.6);
        CHECK(x.s.recall >= 0.95);
        CHECK(x.s.precision >= 0.5);
      }
    }
    std::filesystem::remove(o.output_path);
  }
}
