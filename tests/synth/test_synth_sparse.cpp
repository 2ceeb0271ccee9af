// ReLU / dReLU synthetic models: metadata and tensors, and the sparsity their weights really
// produce (measured with the F32 reference pass of sparse_reference.h on a successor-chain text,
// the kind of sequence greedy decoding of these models produces).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/synth/sparse_design.h"
#include "core/synth/synth_writer.h"
#include "tests/synth/ffn_stats.h"
#include "tests/synth/sparse_reference.h"
#include "tests/synth/synth_files.h"

using namespace ember;
using namespace ember::synth;

namespace {

std::string temp_path(const std::string& name) { return test::synth_temp_path("sparse_" + name); }

std::string write_model(const std::string& name, FfnActivation act, GgmlType type, bool predictor,
                        bool down_t = false, int64_t rank = 0, GgmlType predictor_type = GgmlType::F16) {
  SynthOptions o = test::test_options("tiny", "sparse_" + name, type, 3, act, predictor);
  o.predictor_type = predictor_type;
  o.down_transposed = down_t;
  o.predictor_rank = rank;
  write_synth_model(o);
  return o.output_path;
}

}  // namespace

TEST_CASE("sparse synth models state their activation and carry PowerInfer predictors") {
  const auto path = write_model("meta.gguf", FfnActivation::DReLU, GgmlType::Q8_0, true, true);
  const auto f = gguf::GgufFile::open(path);
  CHECK(f.metadata().get_string("llama.ffn_activation") == "drelu");
  CHECK(f.metadata().get_float("powerinfer.sparse_threshold") == 0.0);
  CHECK(f.is_powerinfer());
  const int64_t rank = default_predictor_rank(256);
  CHECK(rank == 32);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const auto* fc1 = f.find_tensor(p + "fc1.weight");
    const auto* fc2 = f.find_tensor(p + "fc2.weight");
    const auto* dt = f.find_tensor(p + "ffn_down_t.weight");
    REQUIRE(fc1 != nullptr);
    REQUIRE(fc2 != nullptr);
    REQUIRE(dt != nullptr);
    CHECK(fc1->type == GgmlType::F16);
    CHECK(fc1->ne[0] == 256);
    CHECK(fc1->ne[1] == uint64_t(rank));
    CHECK(fc2->ne[0] == uint64_t(rank));
    CHECK(fc2->ne[1] == 768);
    CHECK(dt->type == GgmlType::Q8_0);
    CHECK(dt->ne[0] == 256);
    CHECK(dt->ne[1] == 768);
    // ffn_down_t is ffn_down transposed (one row per neuron).
    const auto down = test::load_matrix(f, p + "ffn_down.weight"), down_t = test::load_matrix(f, p + "ffn_down_t.weight");
    for (int64_t i : {0, 5, 767})
      for (int64_t d : {0, 1, 100, 255})
        CHECK(std::abs(down_t.row(i)[d] - down.row(d)[i]) < 4e-4f);  // both Q8_0, from one matrix
  }
  std::filesystem::remove(path);

  const auto relu = write_model("relu.gguf", FfnActivation::ReLU, GgmlType::Q8_0, false);
  const auto g = gguf::GgufFile::open(relu);
  CHECK(g.metadata().get_string("llama.ffn_activation") == "relu");
  CHECK(g.find_tensor("blk.0.fc1.weight") == nullptr);
  CHECK(!g.is_powerinfer());
  std::filesystem::remove(relu);
}

TEST_CASE("sparse models do not depend on the thread count, and silu ignores the sparse design") {
  auto write = [](const std::string& name, FfnActivation act, int threads) {
    SynthOptions o;
    o.preset = "tiny";
    o.type = GgmlType::Q4_0;
    o.seed = 11;
    o.threads = threads;
    o.activation = act;
    o.predictor = act != FfnActivation::SiLU;
    o.down_transposed = act != FfnActivation::SiLU;
    o.output_path = temp_path(name);
    write_synth_model(o);
    std::ifstream in(o.output_path, std::ios::binary);
    std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::filesystem::remove(o.output_path);
    return bytes;
  };
  const auto a = write("t1.gguf", FfnActivation::DReLU, 1), b = write("t3.gguf", FfnActivation::DReLU, 3);
  CHECK(a.size() > 1000000);
  CHECK(a == b);
  const auto silu = write("silu.gguf", FfnActivation::SiLU, 2);
  CHECK(silu.size() < a.size());  // no predictors, no ffn_down_t
}

TEST_CASE("bad sparse options are refused") {
  SynthOptions o;
  o.preset = "tiny";
  o.output_path = temp_path("never.gguf");
  o.predictor = true;  // SiLU has nothing to predict
  CHECK_THROWS_AS(write_synth_model(o), std::invalid_argument);
  o.activation = FfnActivation::ReLU;
  o.predictor_rank = 1;
  CHECK_THROWS_AS(write_synth_model(o), std::invalid_argument);
  o.predictor_rank = 257;
  CHECK_THROWS_AS(write_synth_model(o), std::invalid_argument);
  CHECK(parse_activation("drelu") == FfnActivation::DReLU);
  CHECK(!parse_activation("gelu").has_value());
}

TEST_CASE("the design's power law: hottest 20% of neurons carry most of the target frequency") {
  SparseParams p;
  p.activation = FfnActivation::DReLU;
  p.dim = 2048, p.n_ff = 5632, p.n_layers = 22, p.predictor_rank = 256;
  auto f = target_frequencies(p, FfnUnit{3});
  CHECK(std::accumulate(f.begin(), f.end(), 0.0) / double(f.size()) == doctest::Approx(kTargetActive).epsilon(1e-3));
  CHECK(*std::max_element(f.begin(), f.end()) <= kMaxFrequency + 1e-9);
  std::sort(f.begin(), f.end(), std::greater<>());
  const double hot = std::accumulate(f.begin(), f.begin() + 5632 / 5, 0.0) / std::accumulate(f.begin(), f.end(), 0.0);
  CHECK(hot > 0.72);
  CHECK(normal_upper_quantile(0.5) == doctest::Approx(0.0).scale(1e-6));
  CHECK(normal_upper_quantile(0.1) == doctest::Approx(1.2816).epsilon(1e-3));
}

// The sparsity measured by real arithmetic on the written weights.
TEST_CASE("drelu and relu synth models are ~90% sparse, power-law, and predictable") {
  struct Case { FfnActivation act; GgmlType type; std::string name; };
  for (const Case& c : {Case{FfnActivation::DReLU, GgmlType::Q4_0, "drelu Q4_0"}, Case{FfnActivation::DReLU, GgmlType::Q8_0, "drelu Q8_0"},
                       Case{FfnActivation::ReLU, GgmlType::Q8_0, "relu Q8_0"}}) {
    CAPTURE(c.name);
    const auto path = write_model("measure.gguf", c.act, c.type, true);
    const auto f = gguf::GgufFile::open(path);
    const auto tokens = test::chain_text(160, 1024);
    const auto tr = test::trace_ffn(f, tokens);
    for (size_t l = 0; l < tr.gate.size(); ++l) {
      const auto s = test::layer_stats(tr, l, c.act == FfnActivation::DReLU);
      MESSAGE(c.name << " layer " << l << ": inactive " << s.inactive << ", hot-20% share " << s.hot20_share
                     << ", recall " << s.recall << ", precision " << s.precision << ", jaccard next "
                     << s.jaccard_next << " vs 16 apart " << s.jaccard_far);
      CHECK(s.inactive > 0.85);
      CHECK(s.inactive < 0.95);
      CHECK(s.hot20_share >= 0.7);
      CHECK(s.recall >= 0.95);
      CHECK(s.precision >= 0.5);
      CHECK(s.jaccard_next > s.jaccard_far + 0.05);  // locality: neighbours share active neurons
    }
    std::filesystem::remove(path);
  }
}

// Quantized predictors: nothing in fc1 / fc2 cancels, and the constant sits in a 32-block of its
// own (rank 64) or shares one (rank 32), so Q8_0 keeps the F16 predictor's recall and Q4_0 nearly.
TEST_CASE("quantized predictors keep their recall") {
  struct Case { GgmlType type; int64_t rank; double min_recall; };
  for (const Case& c : {Case{GgmlType::Q8_0, 32, 0.97}, Case{GgmlType::Q8_0, 64, 0.97}, Case{GgmlType::Q4_0, 32, 0.95},
                       Case{GgmlType::Q4_0, 64, 0.95}}) {
    CAPTURE(type_name(c.type));
    CAPTURE(c.rank);
    const auto path = write_model("qpred.gguf", FfnActivation::DReLU, GgmlType::Q4_0, true, false, c.rank, c.type);
    const auto f = gguf::GgufFile::open(path);
    CHECK(f.find_tensor("blk.0.fc2.weight")->type == c.type);
    const auto tr = test::trace_ffn(f, test::chain_text(160, 1024));
    for (size_t l = 0; l < tr.gate.size(); ++l) {
      const auto s = test::layer_stats(tr, l, true);
      MESSAGE(type_name(c.type) << " predictor, rank " << c.rank << ", layer " << l << ": recall " << s.recall
                                << ", precision " << s.precision);
      CHECK(s.recall >= c.min_recall);
      CHECK(s.precision >= 0.5);
    }
    std::filesystem::remove(path);
  }
}
