#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "core/kernels/matmul.h"
#include "core/kernels/type_traits.h"
#include "core/tensor/ggml_type.h"
#include "tests/kernels/test_helpers.h"

using namespace ember;
using ember::test::quantize;
using ember::test::random_floats;

TEST_CASE("matmul matches matmul_reference for every type, odd shapes, several thread counts") {
  struct Shape {
    int64_t rows, tokens;
  };
  for (GgmlType type : ember::test::kComputeTypes) {
    const KernelTraits* t = kernel_traits(type);
    const int64_t cols = 512;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      MatmulScratch scratch;
      scratch.reserve(8, cols);
      for (Shape s : {Shape{1, 1}, Shape{37, 1}, Shape{67, 1}, Shape{4, 4}, Shape{37, 3}, Shape{19, 9}, Shape{33, 70}}) {
        CAPTURE(type_name(type));
        CAPTURE(threads);
        CAPTURE(s.rows);
        CAPTURE(s.tokens);
        const auto wf = random_floats(static_cast<size_t>(s.rows * cols), 1000 + s.rows, 0.05f);
        const auto w = quantize(*t, wf);
        const MatrixView view{type, cols, s.rows, w.data(), row_bytes(type, cols)};
        // Activations with a stride wider than a row, and outputs likewise, to catch stride mix-ups.
        const int64_t x_stride = cols + 3, y_stride = s.rows + 5;
        const auto x = random_floats(static_cast<size_t>(s.tokens * x_stride), 77 + s.tokens);
        std::vector<float> y(static_cast<size_t>(s.tokens * y_stride), NAN), ref(y.size(), NAN);
        matmul(view, x.data(), s.tokens, x_stride, y.data(), y_stride, pool, scratch);
        matmul_reference(view, x.data(), s.tokens, x_stride, ref.data(), y_stride);
        // Tolerance: relative to the magnitude of the terms (|w| . |x|), F16/BF16/F32 are float sums.
        int bad = 0;
        for (int64_t tok = 0; tok < s.tokens; ++tok) {
          for (int64_t r = 0; r < s.rows; ++r) {
            double magnitude = 0;
            for (int64_t c = 0; c < cols; ++c) magnitude += std::fabs(wf[r * cols + c] * x[tok * x_stride + c]);
            const float got = y[tok * y_stride + r], want = ref[tok * y_stride + r];
            if (!(std::fabs(got - want) <= 1e-4 * magnitude + 1e-6)) {
              if (bad++ < 3) MESSAGE("row " << r << " token " << tok << ": " << got << " vs " << want);
            }
          }
          for (int64_t r = s.rows; r < y_stride; ++r) CHECK(std::isnan(y[tok * y_stride + r]));  // untouched
        }
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("matmul rejects shapes that do not fit the type") {
  ThreadPool pool(1);
  MatmulScratch scratch;
  std::vector<uint8_t> w(18 * 4);
  std::vector<float> x(48), y(4);
  const MatrixView bad_cols{GgmlType::Q4_0, 48, 1, w.data(), 18};
  CHECK_THROWS_AS(matmul(bad_cols, x.data(), 1, 48, y.data(), 1, pool, scratch), std::invalid_argument);
  const MatrixView unsupported{GgmlType::Q5_K, 256, 1, w.data(), 176};
  CHECK_THROWS_AS(matmul(unsupported, x.data(), 1, 256, y.data(), 1, pool, scratch), std::invalid_argument);
  const MatrixView short_stride{GgmlType::Q4_0, 64, 1, w.data(), 18};
  CHECK_THROWS_AS(matmul(short_stride, x.data(), 1, 64, y.data(), 1, pool, scratch), std::invalid_argument);
}

TEST_CASE("matmul with a repack_for_matmul() copy matches matmul_reference") {
  const int64_t cols = 32 * 19;
  for (int64_t rows : {5, 8, 16, 37, 48, 67}) {
    const auto wf = random_floats(static_cast<size_t>(rows * cols), 500 + rows, 0.05f);
    const auto w = quantize(*kernel_traits(GgmlType::Q4_0), wf);
    MatrixView view{GgmlType::Q4_0, cols, rows, w.data(), row_bytes(GgmlType::Q4_0, cols)};
    const std::vector<uint8_t> repacked = repack_for_matmul(view);
    if (repacked.empty()) {
      MESSAGE("no repacked layout on this CPU for " << rows << " rows; plain path only");
    }
    view.repacked = repacked.empty() ? nullptr : repacked.data();
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      MatmulScratch scratch;
      scratch.reserve(1, cols);
      for (int64_t tokens : {1, 3, 70}) {
        CAPTURE(rows);
        CAPTURE(tokens);
        CAPTURE(threads);
        const auto x = random_floats(static_cast<size_t>(tokens * cols), 900 + tokens);
        std::vector<float> y(static_cast<size_t>(tokens * rows), NAN), ref(y.size(), NAN);
        matmul(view, x.data(), tokens, cols, y.data(), rows, pool, scratch);
        matmul_reference(view, x.data(), tokens, cols, ref.data(), rows);
        int bad = 0;
        for (int64_t tok = 0; tok < tokens; ++tok) {
          for (int64_t r = 0; r < rows; ++r) {
            double magnitude = 0;
            for (int64_t c = 0; c < cols; ++c) magnitude += std::fabs(wf[r * cols + c] * x[tok * cols + c]);
            if (!(std::fabs(y[tok * rows + r] - ref[tok * rows + r]) <= 1e-4 * magnitude + 1e-6)) ++bad;
          }
        }
        CHECK(bad == 0);
      }
    }
  }
}

// The block types' prefill paths (register tiles, panels) and decode paths (row kernels, panels)
// at every token count from 1 to 17 (whole 4-token tiles plus every remainder) and row counts that
// are not multiples of the tile or panel height, with and without a repacked copy.
TEST_CASE("matmul of Q4_0/Q8_0 matches matmul_reference at token counts 1..17 and odd row counts") {
  const int64_t cols = 32 * 7;
  ThreadPool pool(2);
  MatmulScratch scratch;
  scratch.reserve(17, cols);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0}) {
    for (int64_t rows : {1, 3, 6, 13, 21}) {
      const auto wf = random_floats(static_cast<size_t>(rows * cols), 300 + rows, 0.05f);
      const auto w = quantize(*kernel_traits(type), wf);
      MatrixView view{type, cols, rows, w.data(), row_bytes(type, cols)};
      const std::vector<uint8_t> repacked = repack_for_matmul(view);
      for (bool use_repacked : {false, true}) {
        if (use_repacked && repacked.empty()) continue;
        view.repacked = use_repacked ? repacked.data() : nullptr;
        for (int64_t tokens = 1; tokens <= 17; ++tokens) {
          CAPTURE(type_name(type));
          CAPTURE(rows);
          CAPTURE(use_repacked);
          CAPTURE(tokens);
          const auto x = random_floats(static_cast<size_t>(tokens * cols), 700 + tokens);
          std::vector<float> y(static_cast<size_t>(tokens * rows), NAN), ref(y.size(), NAN);
          matmul(view, x.data(), tokens, cols, y.data(), rows, pool, scratch);
          matmul_reference(view, x.data(), tokens, cols, ref.data(), rows);
          int bad = 0;
          for (int64_t tok = 0; tok < tokens; ++tok) {
            for (int64_t r = 0; r < rows; ++r) {
              double magnitude = 0;
              for (int64_t c = 0; c < cols; ++c) magnitude += std::fabs(wf[r * cols + c] * x[tok * cols + c]);
              if (!(std::fabs(y[tok * rows + r] - ref[tok * rows + r]) <= 1e-4 * magnitude + 1e-6)) ++bad;
            }
          }
          CHECK(bad == 0);
        }
      }
    }
  }
}
