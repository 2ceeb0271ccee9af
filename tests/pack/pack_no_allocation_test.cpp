// Decode steps on a pack allocate nothing in any mode (the dense down projection from bundles
// included): counted by replacing the global operator new in this test binary.
#include <doctest/doctest.h>

#include "core/cache/budget_planner.h"
#include "tests/pack/pack_support.h"
#include "tests/sparse/decode_allocations.h"
#include "tests/support/counting_new.h"

namespace ember {

TEST_CASE("decode steps on a pack do not allocate") {
  const test::SourceAndPack files(test::allocation_test_spec(GgmlType::Q4_0, GgmlType::Q8_0), "pack-noalloc");
  auto model = Model::load(files.pk.string());
  REQUIRE(model->weights().is_pack());
  test::check_decode_does_not_allocate(*model, test::allocation_count);
}

}  // namespace ember

namespace ember {

TEST_CASE("decode steps under a memory budget do not allocate (cache hits, misses and streamed steps)") {
  const test::SourceAndPack files(test::allocation_test_spec(GgmlType::Q4_0, GgmlType::Q8_0), "pack-noalloc-budget");
  ModelLoadOptions lo;
  lo.offload.budget_bytes = 1;
  uint64_t minimum = 0;
  try {
    Model::load(files.pk.string(), lo);
  } catch (const cache::BudgetTooSmall& e) {
    minimum = e.minimum_bytes();
  }
  REQUIRE(minimum > 0);
  lo.offload.budget_bytes = minimum;  // the smallest cache: misses and evictions every step
  lo.offload.prefetch = false;
  lo.offload.backend = io::IoBackend::Pread;
  auto model = Model::load(files.pk.string(), lo);
  ThreadPool pool(2);
  // The same with prefetching (its own model: the option is fixed at load).
  ModelLoadOptions ahead_options = lo;
  ahead_options.offload.prefetch = true;
  auto ahead = Model::load(files.pk.string(), ahead_options);
  struct Case {
    Model* model;
    SparseOptions::Mode mode;
  };
  for (const Case& k : {Case{model.get(), SparseOptions::Mode::Dense}, Case{model.get(), SparseOptions::Mode::Predictor},
                        Case{ahead.get(), SparseOptions::Mode::Predictor}}) {
    const SparseOptions::Mode m = k.mode;
    Model& mdl = *k.model;
    CAPTURE(sparse_mode_name(m));
    CAPTURE(k.model == ahead.get());
    ContextOptions o;
    o.n_ctx = 64;
    o.sparse.mode = m;
    InferenceContext ctx(mdl, pool, o);
    const int32_t prompt[] = {1, 270, 280};
    const float* logits = ctx.eval(prompt);
    int32_t next = test::argmax(logits, mdl.config().n_vocab);
    logits = ctx.eval(std::span<const int32_t>(&next, 1));  // warm-up
    const long before = test::allocation_count();
    for (int i = 0; i < 8; ++i) {
      next = test::argmax(logits, mdl.config().n_vocab);
      logits = ctx.eval(std::span<const int32_t>(&next, 1));
    }
    CHECK(test::allocation_count() == before);
  }
  CHECK(model->offloaded_ffn()->stats().fetch.bytes_read > 0);
  CHECK(ahead->offloaded_ffn()->stats().fetch.prefetches > 0);
}

}  // namespace ember
