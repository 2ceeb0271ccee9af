// The x86 prefill tiles and decode-rows kernels against one reference dot product per pair.
#include <doctest/doctest.h>

#include <cmath>

#include "core/kernels/cpu_features.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/type_traits.h"
#include "tests/kernels/test_helpers.h"

using namespace ember;

#ifdef EMBER_HAVE_X86_SIMD
namespace {

struct Case {
  GgmlType type;
  float (*reference)(int64_t, const void*, const void*);
  GemmTileFn avx2_tile;
  GemmTileFn vnni_tile;
  GemvRowsFn vnni_rows;
};

const Case kCases[] = {
    {GgmlType::Q4_0, generic::vec_dot_q4_0_q8_0, avx2::gemm_tile_q4_0_q8_0, avx2::gemm_tile_q4_0_q8_0_vnni,
     avx2::gemv_q4_0_q8_0_vnni},
    {GgmlType::Q8_0, generic::vec_dot_q8_0_q8_0, avx2::gemm_tile_q8_0_q8_0, avx2::gemm_tile_q8_0_q8_0_vnni,
     avx2::gemv_q8_0_q8_0_vnni},
};

}  // namespace

TEST_CASE("4x4 tiles (AVX2 and AVX-VNNI) equal per-pair reference dots up to float summation order") {
  if (!cpu_has_avx2_fma_f16c()) {
    MESSAGE("no AVX2 on this CPU: tile kernels not testable here");
    return;
  }
  const int64_t n = 32 * 37;
  for (const Case& c : kCases) {
    CAPTURE(type_name(c.type));
    const KernelTraits* wt = scalar_kernel_traits(c.type);
    const KernelTraits* q8 = kernel_traits(GgmlType::Q8_0);
    const uint64_t row_stride = test::bytes_for(*wt, n) + 18;  // padded rows
    const uint64_t act_stride = test::bytes_for(*q8, n);
    std::vector<uint8_t> w(4 * row_stride), a(4 * act_stride);
    for (int i = 0; i < 4; ++i) {
      wt->from_float(test::random_floats(n, 10 + i, 0.05f).data(), w.data() + i * row_stride, n);
      q8->from_float(test::random_floats(n, 20 + i, 3.0f).data(), a.data() + i * act_stride, n);
    }
    std::vector<GemmTileFn> tiles = {c.avx2_tile};
    if (cpu_has_avx_vnni()) tiles.push_back(c.vnni_tile);
    for (GemmTileFn tile : tiles) {
      for (int n_rows = 1; n_rows <= 4; ++n_rows) {
        for (int n_tokens = 1; n_tokens <= 4; ++n_tokens) {
          float out[16];
          tile(n, w.data(), row_stride, n_rows, a.data(), act_stride, n_tokens, out, 4);
          for (int r = 0; r < n_rows; ++r) {
            for (int t = 0; t < n_tokens; ++t) {
              const float want = c.reference(n, w.data() + r * row_stride, a.data() + t * act_stride);
              CHECK(out[r * 4 + t] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("AVX-VNNI decode rows equal per-row reference dots") {
  if (!cpu_has_avx2_fma_f16c() || !cpu_has_avx_vnni()) {
    MESSAGE("no AVX-VNNI on this CPU: decode-rows kernels not testable here");
    return;
  }
  const int64_t n = 32 * 29;
  for (const Case& c : kCases) {
    CAPTURE(type_name(c.type));
    const KernelTraits* wt = scalar_kernel_traits(c.type);
    const KernelTraits* q8 = kernel_traits(GgmlType::Q8_0);
    const uint64_t row_stride = test::bytes_for(*wt, n);
    std::vector<uint8_t> w(9 * row_stride), a(test::bytes_for(*q8, n));
    wt->from_float(test::random_floats(9 * n, 31, 0.05f).data(), w.data(), 9 * n);
    q8->from_float(test::random_floats(n, 32, 3.0f).data(), a.data(), n);
    for (int n_rows = 1; n_rows <= 9; ++n_rows) {
      std::vector<float> out(9, NAN);
      c.vnni_rows(n, w.data(), row_stride, n_rows, a.data(), out.data());
      for (int r = 0; r < 9; ++r) {
        if (r >= n_rows) {
          CHECK(std::isnan(out[r]));  // nothing written past n_rows
          continue;
        }
        const float want = c.reference(n, w.data() + r * row_stride, a.data());
        CHECK(out[r] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
      }
    }
  }
}

TEST_CASE("Q4_0 panel kernels (AVX2 and AVX-VNNI) equal per-pair reference dots") {
  if (!cpu_has_avx2_fma_f16c()) {
    MESSAGE("no AVX2 on this CPU: panel kernels not testable here");
    return;
  }
  const int64_t nb = 23, n = 32 * nb;
  const KernelTraits* q4 = scalar_kernel_traits(GgmlType::Q4_0);
  const KernelTraits* q8 = kernel_traits(GgmlType::Q8_0);
  const uint64_t row_stride = test::bytes_for(*q4, n) + 18;
  const uint64_t act_stride = test::bytes_for(*q8, n);
  std::vector<uint8_t> w(8 * row_stride), a(4 * act_stride), panel(static_cast<size_t>(nb) * 144);
  for (int r = 0; r < 8; ++r) q4->from_float(test::random_floats(n, 40 + r, 0.05f).data(), w.data() + r * row_stride, n);
  std::vector<int32_t> sums(static_cast<size_t>(4 * nb));
  for (int t = 0; t < 4; ++t) {
    q8->from_float(test::random_floats(n, 50 + t, 3.0f).data(), a.data() + t * act_stride, n);
    avx2::q8_0_bias_sums(nb, a.data() + t * act_stride, 8, sums.data() + t * nb);
  }
  avx2::repack_q4_0_panel8(nb, w.data(), row_stride, panel.data());
  std::vector<PanelGemmFn> kernels = {avx2::panel_gemm_q4_0_avx2};
  if (cpu_has_avx_vnni()) kernels.push_back(avx2::panel_gemm_q4_0_vnni);
  for (PanelGemmFn kernel : kernels) {
    for (int n_tokens = 1; n_tokens <= 4; ++n_tokens) {
      std::vector<float> y(4 * 8, NAN);
      kernel(nb, panel.data(), a.data(), act_stride, sums.data(), static_cast<size_t>(nb), n_tokens, y.data(), 8);
      for (int t = 0; t < 4; ++t) {
        for (int r = 0; r < 8; ++r) {
          if (t >= n_tokens) {
            CHECK(std::isnan(y[t * 8 + r]));
            continue;
          }
          const float want = generic::vec_dot_q4_0_q8_0(n, w.data() + r * row_stride, a.data() + t * act_stride);
          CHECK(y[t * 8 + r] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
        }
      }
    }
  }
}
#endif
