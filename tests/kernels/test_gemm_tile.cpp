// The x86 prefill tiles against one dot product per (row, token).
#include <doctest/doctest.h>

#include <cmath>

#include "core/kernels/cpu_features.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/type_traits.h"
#include "tests/kernels/test_helpers.h"

using namespace ember;

#ifdef EMBER_HAVE_X86_SIMD
TEST_CASE("Q4_0 4x4 tiles (AVX2 and AVX-VNNI) equal per-pair vec_dot up to float summation order") {
  if (!cpu_has_avx2_fma_f16c()) {
    MESSAGE("no AVX2 on this CPU: tile kernels not testable here");
    return;
  }
  const int64_t n = 32 * 37;
  const KernelTraits* q4 = scalar_kernel_traits(GgmlType::Q4_0);
  const KernelTraits* q8 = kernel_traits(GgmlType::Q8_0);
  const uint64_t row_stride = test::bytes_for(*q4, n) + 18;  // padded rows
  const uint64_t act_stride = test::bytes_for(*q8, n);
  std::vector<uint8_t> w(4 * row_stride), a(4 * act_stride);
  for (int i = 0; i < 4; ++i) {
    q4->from_float(test::random_floats(n, 10 + i, 0.05f).data(), w.data() + i * row_stride, n);
    q8->from_float(test::random_floats(n, 20 + i, 3.0f).data(), a.data() + i * act_stride, n);
  }
  std::vector<GemmTileFn> tiles = {avx2::gemm_tile_q4_0_q8_0};
  if (avx2::cpu_has_avxvnni()) tiles.push_back(avx2::gemm_tile_q4_0_q8_0_vnni);
  for (GemmTileFn tile : tiles) {
    for (int n_rows = 1; n_rows <= 4; ++n_rows) {
      for (int n_tokens = 1; n_tokens <= 4; ++n_tokens) {
        float out[16];
        tile(n, w.data(), row_stride, n_rows, a.data(), act_stride, n_tokens, out, 4);
        for (int r = 0; r < n_rows; ++r) {
          for (int t = 0; t < n_tokens; ++t) {
            const float want = generic::vec_dot_q4_0_q8_0(n, w.data() + r * row_stride, a.data() + t * act_stride);
            CHECK(out[r * 4 + t] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
          }
        }
      }
    }
  }
}
#endif
