// Predictor tensors are hostile input like every other tensor: each defect gives one error naming
// the tensor and what was expected.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "core/model/model.h"
#include "tests/sparse/sparse_model_builder.h"

namespace ember {
namespace {

std::string load_error(const test::SparseModelSpec& spec) {
  const auto path = test::write_sparse_model(spec, "sparse-bad-pred");
  std::string message;
  try {
    Model::load(path.string());
  } catch (const std::exception& e) {
    message = e.what();
  }
  std::filesystem::remove(path);
  return message;
}

test::SparseModelSpec with_predictor() {
  test::SparseModelSpec s;
  s.predictor = test::PredictorKind::Random;
  s.rank = 32;
  s.n_layer = 3;
  return s;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("valid predictors load, in every supported type, with per-layer ranks") {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    test::SparseModelSpec s = with_predictor();
    s.predictor_type = t;
    CHECK(load_error(s).empty());
  }
  // Ranks may differ per layer: the exact predictor has rank n_ff, a random one 32; both fine.
  test::SparseModelSpec s = with_predictor();
  s.sparse_threshold = -0.5f;
  const auto path = test::write_sparse_model(s, "sparse-good-pred");
  auto model = Model::load(path.string());
  CHECK(model->weights().has_predictor());
  CHECK(model->config().sparse_threshold == -0.5f);
  const LayerWeights& l = model->weights().layers[1];
  CHECK(l.pred_fc1.cols == 64);
  CHECK(l.pred_fc1.rows == 32);
  CHECK(l.pred_fc2.cols == 32);
  CHECK(l.pred_fc2.rows == 256);
  CHECK(l.ffn_down_t.data == nullptr);
  std::filesystem::remove(path);
}

TEST_CASE("malformed predictor tensors are refused with the tensor and expected shape named") {
  test::SparseModelSpec s = with_predictor();
  s.reshape_tensor = "blk.1.fc1.weight";  // {64, 33}: rank 33, but fc2 has 32
  std::string e = load_error(s);
  CHECK(contains(e, "'blk.1.fc2.weight': shape {32, 256}, expected {33, 256} (rank 33 from blk.1.fc1.weight {64, 33})"));

  s = with_predictor();
  s.reshape_tensor = "blk.2.fc2.weight";
  e = load_error(s);
  CHECK(contains(e, "'blk.2.fc2.weight': shape {32, 257}, expected {32, 256}"));

  // fc1's row length must be n_embd.
  s = with_predictor();
  s.n_embd = 64;
  s.rank = 256;
  s.reshape_tensor = "blk.0.fc1.weight";  // {64, 257}: rank above n_ff
  e = load_error(s);
  CHECK(contains(e, "'blk.0.fc1.weight': shape {64, 257}, expected {64, r} with rank r in [1, n_ff = 256]"));

  s = with_predictor();
  s.retype_tensor = "blk.1.fc2.weight";
  s.retype = GgmlType::BF16;
  e = load_error(s);
  CHECK(contains(e, "'blk.1.fc2.weight': type BF16 is not supported for predictors (supported: F32, F16, Q8_0, Q4_0)"));

  s = with_predictor();
  s.skip_tensor = "blk.2.fc1.weight";
  e = load_error(s);
  CHECK(contains(e, "'blk.2.fc1.weight' is missing: present in 2 of 3 layers"));

  s = with_predictor();
  s.skip_tensor = "blk.0.fc2.weight";
  e = load_error(s);
  CHECK(contains(e, "'blk.0.fc2.weight' is missing: present in 2 of 3 layers"));

  s = with_predictor();
  s.down_t = true;
  s.reshape_tensor = "blk.1.ffn_down_t.weight";
  e = load_error(s);
  CHECK(contains(e, "'blk.1.ffn_down_t.weight': shape {64, 257}, expected {64, 256}"));

  s = with_predictor();
  s.down_t = true;
  s.skip_tensor = "blk.0.ffn_down_t.weight";
  e = load_error(s);
  CHECK(contains(e, "'blk.0.ffn_down_t.weight' is missing: present in 2 of 3 layers"));
}

TEST_CASE("a predictor with only fc1 in every layer names the missing fc2") {
  // Built by hand: the builder writes fc1 and fc2 together, so remove fc2 from all layers.
  test::SparseModelSpec s = with_predictor();
  s.n_layer = 1;
  s.skip_tensor = "blk.0.fc2.weight";
  const std::string e = load_error(s);
  CHECK(contains(e, "'blk.0.fc2.weight' is missing: a predictor needs both fc1 and fc2 in every layer"));
}

}  // namespace ember

namespace ember {

TEST_CASE("powerinfer.sparse_threshold must be a finite float") {
  test::SparseModelSpec s;
  s.sparse_threshold = INFINITY;
  CHECK(load_error(s).find("'powerinfer.sparse_threshold': must be a finite number") != std::string::npos);
  s.sparse_threshold = 0.25f;
  CHECK(load_error(s).empty());
}

}  // namespace ember
