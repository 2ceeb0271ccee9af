// The NEON sets' matmul-only kernels (register tiles, decode rows, Q4_0 panels) against one scalar
// reference dot per (row, token), for every set the CPU runs: under qemu -cpu max that is neon,
// neon-dotprod and i8mm, under -cpu cortex-a53 neon only.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/kernels/cpu_features.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/type_traits.h"
#include "tests/kernels/test_helpers.h"

using namespace ember;

#ifdef EMBER_HAVE_ARM_NEON
namespace {

struct TileCase {
  const char* name;
  GgmlType type;
  GemmTileFn tile;
  bool needs_dotprod;
};

const TileCase kTiles[] = {
    {"neon q4_0", GgmlType::Q4_0, neon::gemm_tile_q4_0_q8_0, false},
    {"neon q8_0", GgmlType::Q8_0, neon::gemm_tile_q8_0_q8_0, false},
    {"dotprod q4_0", GgmlType::Q4_0, neon::gemm_tile_q4_0_q8_0_dotprod, true},
    {"dotprod q8_0", GgmlType::Q8_0, neon::gemm_tile_q8_0_q8_0_dotprod, true},
};

struct RowsCase {
  const char* name;
  GgmlType type;
  GemvRowsFn rows;
  float (*set_vec_dot)(int64_t, const void*, const void*);
  bool needs_dotprod;
};

const RowsCase kRows[] = {
    {"neon q4_0", GgmlType::Q4_0, neon::gemv_q4_0_q8_0, neon::vec_dot_q4_0_q8_0, false},
    {"neon q8_0", GgmlType::Q8_0, neon::gemv_q8_0_q8_0, neon::vec_dot_q8_0_q8_0, false},
    {"dotprod q4_0", GgmlType::Q4_0, neon::gemv_q4_0_q8_0_dotprod, neon::vec_dot_q4_0_q8_0_dotprod, true},
    {"dotprod q8_0", GgmlType::Q8_0, neon::gemv_q8_0_q8_0_dotprod, neon::vec_dot_q8_0_q8_0_dotprod, true},
};

float reference_dot(GgmlType type, int64_t n, const void* row, const void* act) {
  return scalar_kernel_traits(type)->vec_dot(n, row, act);
}

}  // namespace

// Integer block sums are exact; only the float scaling and summation order differ from the
// reference: 1e-5 relative (as the x86 tiles).
TEST_CASE("NEON register tiles, every shape up to 4x4, equal per-pair reference dots") {
  for (int64_t nb : {1, 2, 7, 37}) {
    const int64_t n = 32 * nb;
    for (const TileCase& c : kTiles) {
      if (c.needs_dotprod && !cpu_has_dotprod()) continue;
      CAPTURE(c.name);
      CAPTURE(nb);
      const KernelTraits* wt = scalar_kernel_traits(c.type);
      const KernelTraits* q8 = kernel_traits(GgmlType::Q8_0);
      const uint64_t row_stride = test::bytes_for(*wt, n) + 18;  // padded rows
      const uint64_t act_stride = test::bytes_for(*q8, n) + 34;
      std::vector<uint8_t> w(4 * row_stride), a(4 * act_stride);
      for (int i = 0; i < 4; ++i) {
        wt->from_float(test::random_floats(n, 10 + i, 0.05f).data(), w.data() + i * row_stride, n);
        q8->from_float(test::random_floats(n, 20 + i, 3.0f).data(), a.data() + i * act_stride, n);
      }
      for (int n_rows = 1; n_rows <= 4; ++n_rows) {
        for (int n_tokens = 1; n_tokens <= 4; ++n_tokens) {
          std::vector<float> out(4 * 5, NAN);
          c.tile(n, w.data(), row_stride, n_rows, a.data(), act_stride, n_tokens, out.data(), 5);
          for (int r = 0; r < 4; ++r) {
            for (int t = 0; t < 5; ++t) {
              if (r >= n_rows || t >= n_tokens) {
                CHECK(std::isnan(out[r * 5 + t]));  // nothing written outside the tile
                continue;
              }
              const float want = reference_dot(c.type, n, w.data() + r * row_stride, a.data() + t * act_stride);
              CHECK(out[r * 5 + t] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
            }
          }
        }
      }
    }
  }
}

// 1..19 rows: every group size (8, 4, 2, 1) and their combinations; odd and even block counts
// (the two float accumulators). Each row must be the set's vec_dot exactly, and so within the
// vec_dot bound of the reference.
TEST_CASE("NEON decode rows equal the set's vec_dot bit for bit") {
  for (int64_t nb : {1, 2, 9, 30}) {
    const int64_t n = 32 * nb;
    for (const RowsCase& c : kRows) {
      if (c.needs_dotprod && !cpu_has_dotprod()) continue;
      CAPTURE(c.name);
      CAPTURE(nb);
      const KernelTraits* wt = scalar_kernel_traits(c.type);
      const KernelTraits* q8 = kernel_traits(GgmlType::Q8_0);
      const uint64_t row_stride = test::bytes_for(*wt, n) + 34;
      std::vector<uint8_t> w(20 * row_stride), a(test::bytes_for(*q8, n));
      for (int r = 0; r < 20; ++r) {
        wt->from_float(test::random_floats(n, 60 + r, 0.05f).data(), w.data() + r * row_stride, n);
      }
      q8->from_float(test::random_floats(n, 59, 3.0f).data(), a.data(), n);
      for (int n_rows = 1; n_rows <= 19; ++n_rows) {
        CAPTURE(n_rows);
        std::vector<float> out(20, NAN);
        c.rows(n, w.data(), row_stride, n_rows, a.data(), out.data());
        for (int r = 0; r < 20; ++r) {
          if (r >= n_rows) {
            CHECK(std::isnan(out[r]));  // nothing written past n_rows
            continue;
          }
          const void* row = w.data() + r * row_stride;
          CHECK(out[r] == c.set_vec_dot(n, row, a.data()));
          CHECK(out[r] == doctest::Approx(reference_dot(c.type, n, row, a.data())).epsilon(1e-5).scale(1.0));
        }
      }
    }
  }
}

// The two panel kernels compute the same exact integer sums and the same float operations in the
// same order (scale d_row * d_token, one fma per block), so they agree bit for bit; against the
// reference, 1e-5 relative as the x86 panels.
TEST_CASE("ARM Q4_0 4-row panels (sdot and smmla) equal per-pair reference dots") {
  if (!cpu_has_dotprod()) {
    MESSAGE("no dot product on this CPU: ARM panel kernels not testable here");
    return;
  }
  MESSAGE("cpu_has_i8mm: " << cpu_has_i8mm());
  const KernelTraits* q4 = scalar_kernel_traits(GgmlType::Q4_0);
  const KernelTraits* q8 = kernel_traits(GgmlType::Q8_0);
  for (int64_t nb : {1, 2, 11, 40}) {
    const int64_t n = 32 * nb;
    const uint64_t row_stride = test::bytes_for(*q4, n) + 18;
    const uint64_t act_stride = test::bytes_for(*q8, n) + 34;
    std::vector<uint8_t> w(4 * row_stride), a(4 * act_stride), panel(static_cast<size_t>(nb) * 72);
    for (int r = 0; r < 4; ++r) q4->from_float(test::random_floats(n, 80 + r, 0.05f).data(), w.data() + r * row_stride, n);
    for (int t = 0; t < 4; ++t) q8->from_float(test::random_floats(n, 90 + t, 3.0f).data(), a.data() + t * act_stride, n);
    neon::repack_q4_0_panel4(nb, w.data(), row_stride, panel.data());
    for (int n_tokens = 1; n_tokens <= 4; ++n_tokens) {
      CAPTURE(nb);
      CAPTURE(n_tokens);
      const size_t y_stride = 6;
      std::vector<float> y(4 * y_stride, NAN), y_i8mm(y.size(), NAN);
      neon::panel_gemm_q4_0_dotprod(nb, panel.data(), a.data(), act_stride, nullptr, 0, n_tokens, y.data(), y_stride);
      if (cpu_has_i8mm()) {
        neon::panel_gemm_q4_0_i8mm(nb, panel.data(), a.data(), act_stride, nullptr, 0, n_tokens, y_i8mm.data(),
                                   y_stride);
      }
      for (int t = 0; t < 4; ++t) {
        for (size_t r = 0; r < y_stride; ++r) {
          const float got = y[t * y_stride + r];
          if (t >= n_tokens || r >= 4) {
            CHECK(std::isnan(got));  // nothing written outside the 4 rows x n_tokens
            if (cpu_has_i8mm()) CHECK(std::isnan(y_i8mm[t * y_stride + r]));
            continue;
          }
          const float want = generic::vec_dot_q4_0_q8_0(n, w.data() + r * row_stride, a.data() + t * act_stride);
          CHECK(got == doctest::Approx(want).epsilon(1e-5).scale(1.0));
          if (cpu_has_i8mm()) CHECK(y_i8mm[t * y_stride + r] == got);
        }
      }
    }
  }
}

TEST_CASE("ARM Q4_0 panels are used exactly when neon-dotprod runs; i8mm needs the dot product") {
  if (cpu_has_i8mm()) CHECK(cpu_has_dotprod());
  const Q4_0Panels* panels = q4_0_panels();
  CHECK((panels != nullptr) == (active_kernel_set() == KernelSet::NeonDotprod));
  if (panels != nullptr) {
    CHECK(panels->rows == 4);
    CHECK((panels->bias_sums == nullptr));
    CHECK((panels->gemm == (cpu_has_i8mm() ? neon::panel_gemm_q4_0_i8mm : neon::panel_gemm_q4_0_dotprod)));
  }
}
#endif
