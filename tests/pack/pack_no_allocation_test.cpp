// Decode steps on a pack allocate nothing in any mode (the dense down projection from bundles
// included): counted by replacing the global operator new in this test binary.
#include <doctest/doctest.h>

#include <filesystem>

#include "tests/pack/pack_support.h"
#include "tests/sparse/sparse_model_builder.h"
#include "tests/sparse/sparse_support.h"
#include "tests/support/counting_new.h"

namespace ember {

TEST_CASE("decode steps on a pack do not allocate") {
  test::SparseModelSpec spec;
  spec.act = FfnActivation::DReLU;
  spec.matrix_type = GgmlType::Q4_0;
  spec.predictor = test::PredictorKind::Random;
  spec.predictor_type = GgmlType::Q8_0;
  const auto src = test::write_sparse_model(spec, "pack-noalloc-src");
  const auto pk = test::make_pack(src, "pack-noalloc", test::reversed_orders(spec.n_layer, spec.n_ff));
  auto model = Model::load(pk.string());
  REQUIRE(model->weights().is_pack());
  ThreadPool pool(2);
  using Mode = SparseOptions::Mode;
  for (Mode m : {Mode::Dense, Mode::Oracle, Mode::Predictor, Mode::Threshold}) {
    for (bool diagnostics : {false, true}) {
      CAPTURE(sparse_mode_name(m));
      CAPTURE(diagnostics);
      ContextOptions o;
      o.n_ctx = 64;
      o.sparse.mode = m;
      o.sparse.diagnostics = diagnostics;
      o.sparse.target_sparsity = 0.5f;
      InferenceContext ctx(*model, pool, o);
      const int32_t prompt[] = {1, 270, 280};
      ctx.eval(prompt);
      int32_t token[] = {290};
      ctx.eval(token);  // warm-up step
      const long before = test::allocation_count();
      for (int i = 0; i < 8; ++i) {
        const float* logits = ctx.eval(token);
        token[0] = test::argmax(logits, model->config().n_vocab);
      }
      CHECK(test::allocation_count() == before);
    }
  }
  std::filesystem::remove(src);
  std::filesystem::remove(pk);
}

}  // namespace ember
