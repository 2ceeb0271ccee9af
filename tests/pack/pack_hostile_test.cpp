// Packs are files from elsewhere: a broken one must fail to load with an error naming the key or
// tensor. Also the writer's own refusals (a pack as source, a profile for another model, an order
// that is not a permutation).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "core/model/model.h"
#include "tests/pack/pack_support.h"
#include "tests/sparse/sparse_model_builder.h"

namespace ember {
namespace {

std::string load_error(const std::filesystem::path& p) {
  try {
    Model::load(p.string());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct Fixture {
  test::SparseModelSpec spec;
  std::filesystem::path src, pk;
  Fixture() {
    spec.matrix_type = GgmlType::Q8_0;
    spec.predictor = test::PredictorKind::Exact;
    src = test::write_sparse_model(spec, "pack-hostile-src");
    pk = test::make_pack(src, "pack-hostile", test::reversed_orders(spec.n_layer, spec.n_ff));
  }
  ~Fixture() {
    std::filesystem::remove(src);
    std::filesystem::remove(pk);
  }
  // Rewrites the pack with one defect, returns the load error and removes the rewritten file.
  std::string broken(const test::Rewrite& r) {
    const auto bad = test::rewrite_gguf(pk, "pack-hostile-bad", r);
    const std::string e = load_error(bad);
    std::filesystem::remove(bad);
    return e;
  }
};

}  // namespace

TEST_CASE("an unmodified rewrite still loads (the rewriting itself is sound)") {
  Fixture fx;
  CHECK(fx.broken({}) == "");
}

TEST_CASE("corrupt pack metadata gives errors naming the key") {
  Fixture fx;
  SUBCASE("bundle_bytes wrong") {
    const std::string e = fx.broken({[](auto& md) { test::set_uint(md, pack::kBundleBytesKey, 999); }, {}});
    MESSAGE(e);
    CHECK(contains(e, "'ember.pack.bundle_bytes' is 999, expected"));
  }
  SUBCASE("down offset inconsistent") {
    const std::string e = fx.broken({[](auto& md) { test::set_uint(md, pack::kDownOffsetKey, 4); }, {}});
    CHECK(contains(e, "'ember.pack.down_offset' is 4"));
  }
  SUBCASE("unsupported version") {
    const std::string e = fx.broken({[](auto& md) { test::set_uint(md, pack::kVersionKey, 2); }, {}});
    CHECK(contains(e, "version 2 is not supported"));
  }
  SUBCASE("a type id that is no ggml type, and one without kernels") {
    CHECK(contains(fx.broken({[](auto& md) { test::set_uint(md, pack::kDownTypeKey, 77); }, {}}),
                   "'ember.pack.down_type': 77 is not a ggml type id"));
    CHECK(contains(fx.broken({[](auto& md) { test::set_uint(md, pack::kGateTypeKey, 24); }, {}}),
                   "gate type I8 is not supported"));
  }
  SUBCASE("a missing key") {
    const std::string e = fx.broken({[](auto& md) {
                                       std::erase_if(md, [](const auto& kv) { return kv.first == pack::kUpOffsetKey; });
                                     },
                                     {}});
    CHECK(contains(e, "'ember.pack.up_offset' is missing"));
  }
}

TEST_CASE("corrupt pack tensors give errors naming the tensor") {
  Fixture fx;
  SUBCASE("perm with a duplicate") {
    const std::string e = fx.broken({{}, [](const gguf::TensorInfo& t, std::vector<uint8_t>& b) {
                                       if (t.name == "blk.1.neuron_perm") reinterpret_cast<int32_t*>(b.data())[9] = 255;
                                       return true;
                                     }});
    MESSAGE(e);
    CHECK(contains(e, "'blk.1.neuron_perm' is not a permutation of [0, n_ff): value 255 appears twice (positions 0 and 9)"));
  }
  SUBCASE("perm out of range") {
    const std::string e = fx.broken({{}, [](const gguf::TensorInfo& t, std::vector<uint8_t>& b) {
                                       if (t.name == "blk.0.neuron_perm") reinterpret_cast<int32_t*>(b.data())[4] = -1;
                                       return true;
                                     }});
    CHECK(contains(e, "value -1 at position 4 is outside [0, 256)"));
  }
  SUBCASE("missing neuron_perm") {
    const std::string e = fx.broken({{}, [](const gguf::TensorInfo& t, std::vector<uint8_t>&) {
                                       return t.name != "blk.1.neuron_perm";
                                     }});
    CHECK(contains(e, "'blk.1.neuron_perm' is missing"));
  }
  SUBCASE("a frequency that is NaN") {
    const std::string e = fx.broken({{}, [](const gguf::TensorInfo& t, std::vector<uint8_t>& b) {
                                       if (t.name == "blk.0.neuron_freq") reinterpret_cast<float*>(b.data())[7] = NAN;
                                       return true;
                                     }});
    CHECK(contains(e, "'blk.0.neuron_freq': value nan at 7 is not a frequency in [0, 1]"));
  }
  SUBCASE("missing bundles") {
    const std::string e = fx.broken({{}, [](const gguf::TensorInfo& t, std::vector<uint8_t>&) {
                                       return t.name != "blk.0.ffn_bundles";
                                     }});
    CHECK(contains(e, "'blk.0.ffn_bundles' is missing"));
  }
  SUBCASE("a missing fc2 is caught by the predictor checks") {
    const std::string e = fx.broken({{}, [](const gguf::TensorInfo& t, std::vector<uint8_t>&) {
                                       return t.name != "blk.1.fc2.weight";
                                     }});
    CHECK(contains(e, "blk.1.fc2.weight"));
  }
}

TEST_CASE("bundles of the wrong shape, a plain FFN tensor in a pack, a truncated pack") {
  Fixture fx;
  SUBCASE("bundles shape disagrees with bundle_bytes") {
    // bundle_bytes, the offsets and the types all say Q4_0 rows now; the tensor still holds Q8_0 bundles.
    const pack::BundleLayout q4 = pack::compute_bundle_layout(GgmlType::Q4_0, GgmlType::Q4_0, GgmlType::F16, 64);
    const std::string e = fx.broken({[&](auto& md) {
                                       test::set_uint(md, pack::kGateTypeKey, 2);
                                       test::set_uint(md, pack::kUpTypeKey, 2);
                                       test::set_uint(md, pack::kBundleBytesKey, q4.bundle_bytes);
                                       test::set_uint(md, pack::kUpOffsetKey, q4.up_offset);
                                       test::set_uint(md, pack::kDownOffsetKey, q4.down_offset);
                                     },
                                     {}});
    MESSAGE(e);
    CHECK(contains(e, "'blk.0.ffn_bundles': shape {" + std::to_string(2 * 68 + 128) + ", 256}, expected {" +
                          std::to_string(q4.bundle_bytes) + ", 256}"));
  }
  SUBCASE("truncated") {
    const auto cut = test::temp_path("pack-hostile-cut");
    std::filesystem::copy_file(fx.pk, cut, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 5000);
    const std::string e = load_error(cut);
    MESSAGE(e);
    CHECK(!e.empty());
    CHECK(contains(e, "runs past the end of the file"));
    std::filesystem::remove(cut);
  }
  SUBCASE("a plain ffn_gate beside the bundles") {
    // Splice the source's gate of layer 0 into the pack.
    const gguf::GgufFile s = gguf::GgufFile::open(fx.src.string());
    const gguf::TensorInfo* g = s.find_tensor("blk.0.ffn_gate.weight");
    std::vector<uint8_t> gate(static_cast<size_t>(g->n_bytes));
    s.read_tensor(*g, gate.data());
    const gguf::GgufFile p = gguf::GgufFile::open(fx.pk.string());
    gguf::GgufWriter w;
    for (const auto& [k, v] : p.metadata().entries()) w.add_value(k, v);
    for (const gguf::TensorInfo& t : p.tensors())
      w.add_tensor(t.name, t.type, std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims));
    w.add_tensor(g->name, g->type, {g->ne[0], g->ne[1]});
    const auto out = test::temp_path("pack-hostile-gate");
    w.begin(out.string());
    for (const gguf::TensorInfo& t : p.tensors()) {
      std::vector<uint8_t> b(static_cast<size_t>(t.n_bytes));
      p.read_tensor(t, b.data());
      w.write_tensor_data(b.data(), b.size());
    }
    w.write_tensor_data(gate.data(), gate.size());
    w.finish();
    CHECK(contains(load_error(out), "'blk.0.ffn_gate.weight' must not be in a pack"));
    std::filesystem::remove(out);
  }
}

TEST_CASE("the writer refuses a pack as source, a foreign profile and a bad order") {
  Fixture fx;
  pack::PackOptions o;
  o.output_path = test::temp_path("pack-refused").string();
  o.source_path = fx.pk.string();
  CHECK_THROWS_WITH_AS(pack::write_pack(o), doctest::Contains("is already a pack"), std::runtime_error);
  o.source_path = fx.src.string();
  ActivationProfile p;
  p.activation = "relu";
  p.n_ff = 128;
  p.layers.resize(2);
  for (auto& l : p.layers) {
    l.frequency.assign(128, 0.5f);
    l.gate_magnitude.assign(ActivationProfile::kPercentiles, 0.0f);
  }
  o.profile = &p;
  CHECK_THROWS_AS(pack::write_pack(o), std::invalid_argument);
  o.profile = nullptr;
  o.order = test::reversed_orders(2, 256);
  o.order[1][17] = o.order[1][18];
  CHECK_THROWS_WITH_AS(pack::write_pack(o), doctest::Contains("the bundle order of layer 1: value"), std::runtime_error);
  o.order.clear();
  o.output_path = fx.src.string();
  CHECK_THROWS_WITH_AS(pack::write_pack(o), doctest::Contains("is the source model"), std::runtime_error);
  CHECK(!std::filesystem::exists(test::temp_path("pack-refused")));
}

}  // namespace ember
