#pragma once
// The no-allocation check of the decode loop, shared by the sparse and the pack tests: a model on
// which every sparse mode has work to do, and decode steps in every mode that must not allocate.
// The allocation counter is passed in rather than included: tests/support/counting_new.h defines
// the global operator new and may be included by one .cpp of a test binary only.
#include <doctest/doctest.h>

#include "core/model/inference_context.h"
#include "tests/sparse/sparse_model_builder.h"
#include "tests/sparse/sparse_support.h"

namespace ember::test {

// dReLU (gate and up both decide which neurons fire) with a random predictor of the given type.
inline SparseModelSpec allocation_test_spec(GgmlType matrix_type, GgmlType predictor_type) {
  SparseModelSpec spec;
  spec.act = FfnActivation::DReLU;
  spec.matrix_type = matrix_type;
  spec.predictor = PredictorKind::Random;
  spec.predictor_type = predictor_type;
  return spec;
}

// In every sparse mode, with and without diagnostics: after a prompt and one warm-up step (which
// may size scratch buffers), 8 greedy decode steps leave `allocation_count()` where it was.
inline void check_decode_does_not_allocate(const Model& model, long (*allocation_count)()) {
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
      InferenceContext ctx(model, pool, o);
      const int32_t prompt[] = {1, 270, 280};
      ctx.eval(prompt);
      int32_t token[] = {290};
      ctx.eval(token);  // warm-up step
      const long before = allocation_count();
      for (int i = 0; i < 8; ++i) {
        const float* logits = ctx.eval(token);
        token[0] = argmax(logits, model.config().n_vocab);
      }
      CHECK(allocation_count() == before);
    }
  }
}

}  // namespace ember::test
