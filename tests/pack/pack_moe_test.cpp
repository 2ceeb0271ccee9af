// Packs of mixture-of-experts models: each expert of each layer is a unit of bundles (stacked in
// the layer's tensors). Both source layouts pack and verify; the pack computes its source's model;
// under a memory budget it gives the all-in-RAM pack's floats; a broken expert is named.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/pack/pack_verify.h"
#include "tests/model/moe_model_builder.h"
#include "tests/pack/pack_support.h"
#include "tests/sparse/sparse_support.h"

namespace ember {
namespace {

using Mode = SparseOptions::Mode;

// moe-tiny (8 dReLU experts of 512 neurons, 2 used, predictors, Q8_0) and its pack with every
// unit's bundles reversed, made once.
struct MoePack {
  MoePack() {
    synth::SynthOptions s;
    s.preset = "moe-tiny";
    s.type = GgmlType::Q8_0;
    s.activation = FfnActivation::DReLU;
    s.predictor = true;
    s.threads = 2;
    s.output_path = test::temp_path("moe-pack-src").string();
    synth::write_synth_model(s);
    src = s.output_path;
    pk = test::make_pack(src, "moe-pack", test::reversed_orders(2 * 8, 512));
  }
  ~MoePack() {
    std::filesystem::remove(src);
    std::filesystem::remove(pk);
  }
  std::filesystem::path src, pk;
};

const MoePack& moe_pack() {
  static const MoePack p;
  return p;
}

SparseOptions predictor() {
  SparseOptions o;
  o.mode = Mode::Predictor;
  return o;
}

const std::vector<int32_t> kPrompt = {1, 50, 60, 70, 80, 90, 100, 110};

}  // namespace

TEST_CASE("an MoE pack verifies against its source and computes the same model") {
  const MoePack& mp = moe_pack();
  const pack::VerifyReport r = pack::verify_pack(mp.src.string(), mp.pk.string());
  CHECK(r.ok());
  CHECK(r.bundles_checked == 2 * 8 * 512);
  auto src = Model::load(mp.src.string());
  auto pk = Model::load(mp.pk.string());
  REQUIRE(pk->weights().is_pack());
  CHECK(pk->weights().layers[1].experts[3].neuron_perm[0] == 511);  // reversed
  ThreadPool pool(2);
  for (const SparseOptions& mode : {SparseOptions{}, predictor()}) {
    const test::GreedyRun a = test::greedy_run(*src, pool, mode, kPrompt, 16);
    const test::GreedyRun b = test::greedy_run(*pk, pool, mode, kPrompt, 16);
    CHECK(a.tokens == b.tokens);
    // The same products; the down sums run in bundle order (reversed), dense down through bundles.
    CHECK(test::max_logit_diff(a, b) <= 0.05f);
  }
}

TEST_CASE("an MoE file with one tensor per expert (PowerInfer's layout) packs and verifies") {
  test::MoeModelSpec spec;
  spec.activation = "drelu";
  spec.stacked = false;
  spec.down = false;
  spec.down_t = true;
  spec.predictor_rank = 32;
  spec.matrix_type = GgmlType::Q8_0;
  test::RemoveOnExit src{test::write_moe_model(spec, "moe-per-expert-src")};
  test::RemoveOnExit pk{test::make_pack(src.path, "moe-per-expert-pack", test::reversed_orders(2 * 4, 96))};
  CHECK(pack::verify_pack(src.path.string(), pk.path.string()).ok());
  ThreadPool pool(2);
  auto a = Model::load(src.path.string()), b = Model::load(pk.path.string());
  CHECK(test::greedy_run(*a, pool, predictor(), kPrompt, 8).tokens == test::greedy_run(*b, pool, predictor(), kPrompt, 8).tokens);
}

TEST_CASE("an MoE pack under a memory budget gives the all-in-RAM floats, prompts and decode") {
  const MoePack& mp = moe_pack();
  const std::string path = mp.pk.string();
  const uint64_t file_bytes = std::filesystem::file_size(mp.pk);
  ModelLoadOptions probe;
  probe.offload.budget_bytes = 1;
  uint64_t minimum = 0;
  try {
    Model::load(path, probe);
  } catch (const cache::BudgetTooSmall& e) {
    minimum = e.minimum_bytes();
  }
  REQUIRE(minimum > 0);
  {
    // Unset, prefetch follows the pack: off for a mixture (a second predictor per routed expert).
    ModelLoadOptions o;
    o.offload.budget_bytes = minimum;
    o.offload.backend = io::IoBackend::Pread;
    CHECK_FALSE(Model::load(path, o)->offloaded_ffn()->prefetch_enabled());
  }
  ThreadPool pool(2);
  auto in_ram = Model::load(path);
  for (const SparseOptions& mode : {predictor(), SparseOptions{}}) {
    const test::GreedyRun want = test::greedy_run(*in_ram, pool, mode, kPrompt, 20);
    for (const uint64_t budget : {file_bytes, std::max(file_bytes / 2, minimum), minimum}) {
      for (const bool prefetch : {false, true}) {
        CAPTURE(budget);
        CAPTURE(prefetch);
        ModelLoadOptions o;
        o.offload.budget_bytes = budget;
        o.offload.prefetch = prefetch;
        o.offload.backend = io::IoBackend::Pread;
        auto model = Model::load(path, o);
        REQUIRE(model->offloaded_ffn() != nullptr);
        CHECK(model->offloaded_ffn()->plan().total_bytes <= budget);
        const test::GreedyRun got = test::greedy_run(*model, pool, mode, kPrompt, 20);
        CHECK(got.tokens == want.tokens);
        CHECK(got.logits == want.logits);
        const OffloadStats st = model->offloaded_ffn()->stats();
        CHECK(st.dense_steps > 0);
        if (mode.mode == Mode::Predictor) {
          CHECK(st.sparse_steps == 20 * 2 * 2);  // decode steps x layers x experts per token
          if (budget == minimum) CHECK(st.cache.misses > 0);
          if (prefetch && budget == minimum) CHECK(st.fetch.prefetched_bundles > 0);
          // Both routed experts' bundles go out in one prefetch per layer, not one per expert.
          if (prefetch) CHECK(st.fetch.prefetches <= 20 * 2);
        }
        model->offloaded_ffn()->check_consistency();
      }
    }
  }
}

TEST_CASE("a broken expert of an MoE pack is named") {
  const MoePack& mp = moe_pack();
  auto load_error = [&](const test::Rewrite& r) {
    const auto broken = test::rewrite_gguf(mp.pk, "moe-pack-broken", r);
    std::string e;
    try {
      Model::load(broken.string());
    } catch (const std::exception& x) {
      e = x.what();
    }
    std::filesystem::remove(broken);
    return e;
  };
  const std::string perm = load_error({{}, [](const gguf::TensorInfo& t, std::vector<uint8_t>& b) {
                                         if (t.name == "blk.1.neuron_perm") reinterpret_cast<int32_t*>(b.data())[2 * 512 + 9] = 0;
                                         return true;
                                       }});
  CHECK(perm.find("'blk.1.neuron_perm' (expert 2) is not a permutation") != std::string::npos);
  const std::string freq = load_error({{}, [](const gguf::TensorInfo& t, std::vector<uint8_t>& b) {
                                         if (t.name == "blk.0.neuron_freq") reinterpret_cast<float*>(b.data())[512 + 7] = NAN;
                                         return true;
                                       }});
  CHECK(freq.find("'blk.0.neuron_freq' (expert 1): value nan at 7") != std::string::npos);
  const std::string plain = load_error({{}, [](const gguf::TensorInfo& t, std::vector<uint8_t>&) {
                                          return t.name != "blk.0.fc2_exps.weight";
                                        }});
  CHECK(plain.find("'blk.0.fc2_exps.weight' is missing") != std::string::npos);
}

TEST_CASE("under a memory budget an MoE pack's stacked predictors count once, repacked or not") {
  // Q4_0 predictors are repacked for matmul: the mapped original must then be released, not held
  // (and counted) beside its copy, or the neuron cache loses the predictors' size.
  synth::SynthOptions s;
  s.preset = "moe-tiny";
  s.type = GgmlType::Q4_0;
  s.activation = FfnActivation::DReLU;
  s.predictor = true;
  s.predictor_type = GgmlType::Q4_0;
  s.threads = 2;
  s.output_path = test::temp_path("moe-pack-q4-src").string();
  synth::write_synth_model(s);
  test::RemoveOnExit src{s.output_path};
  test::RemoveOnExit pk{test::make_pack(src.path, "moe-pack-q4", test::reversed_orders(2 * 8, 512))};
  const uint64_t budget = std::filesystem::file_size(pk.path);
  auto weights_bytes = [&](bool repack) {
    ModelLoadOptions o;
    o.repack = repack;
    o.offload.budget_bytes = budget;
    o.offload.backend = io::IoBackend::Pread;
    return Model::load(pk.path.string(), o)->weights().memory_bytes();
  };
  uint64_t predictor_bytes = 0;
  {
    auto m = Model::load(pk.path.string());
    for (const LayerWeights& l : m->weights().layers) {
      for (const ExpertWeights& ex : l.experts) {
        predictor_bytes += ex.pred_fc1.row_stride * static_cast<uint64_t>(ex.pred_fc1.rows) +
                           ex.pred_fc2.row_stride * static_cast<uint64_t>(ex.pred_fc2.rows);
      }
    }
  }
  REQUIRE(predictor_bytes > 0);
  const uint64_t repacked = weights_bytes(true), plain = weights_bytes(false);
  CAPTURE(repacked);
  CAPTURE(plain);
  CAPTURE(predictor_bytes);
  // Repacking changes the layout, not the size (whole panels): the two differ by far less than the
  // predictors' bytes, which double counting would add.
  CHECK(repacked < plain + predictor_bytes / 2);
}

}  // namespace ember
