// The AVX-512 VNNI Q4_0 panel kernel (16-row panels) against one scalar reference dot per
// (row, token), and the choice of kernel set on CPUs that have AVX-512 VNNI.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "core/kernels/cpu_features.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/type_traits.h"
#include "tests/kernels/test_helpers.h"

using namespace ember;

#ifdef EMBER_HAVE_X86_AVX512
TEST_CASE("AVX-512 VNNI Q4_0 panel16 kernel equals per-pair reference dots") {
  if (!cpu_has_avx512_vnni()) {
    MESSAGE("no AVX-512 VNNI on this CPU: panel16 kernel not testable here");
    return;
  }
  // Odd block count, padded rows (stride > packed row), activations up to +-127 quants: the
  // integer sums are exact, so only the float scaling and summation order differ (1e-5 relative).
  for (int64_t nb : {1, 7, 23}) {
    const int64_t n = 32 * nb;
    const KernelTraits* q4 = scalar_kernel_traits(GgmlType::Q4_0);
    const KernelTraits* q8 = kernel_traits(GgmlType::Q8_0);
    const uint64_t row_stride = test::bytes_for(*q4, n) + 18;
    const uint64_t act_stride = test::bytes_for(*q8, n);
    std::vector<uint8_t> w(16 * row_stride), a(8 * act_stride), panel(static_cast<size_t>(nb) * 288);
    for (int r = 0; r < 16; ++r) {
      q4->from_float(test::random_floats(n, 140 + r, 0.05f).data(), w.data() + r * row_stride, n);
    }
    std::vector<int32_t> sums(static_cast<size_t>(8 * nb));
    for (int t = 0; t < 8; ++t) {
      q8->from_float(test::random_floats(n, 150 + t, 3.0f).data(), a.data() + t * act_stride, n);
      avx2::q8_0_bias_sums(nb, a.data() + t * act_stride, 8, sums.data() + t * nb);
    }
    avx512::repack_q4_0_panel16(nb, w.data(), row_stride, panel.data());
    for (int n_tokens = 1; n_tokens <= 8; ++n_tokens) {
      CAPTURE(nb);
      CAPTURE(n_tokens);
      std::vector<float> y(8 * 16, NAN);
      avx512::panel16_gemm_q4_0(nb, panel.data(), a.data(), act_stride, sums.data(), static_cast<size_t>(nb), n_tokens,
                                y.data(), 16);
      for (int t = 0; t < 8; ++t) {
        for (int r = 0; r < 16; ++r) {
          if (t >= n_tokens) {
            CHECK(std::isnan(y[t * 16 + r]));  // nothing written past n_tokens
            continue;
          }
          const float want = generic::vec_dot_q4_0_q8_0(n, w.data() + r * row_stride, a.data() + t * act_stride);
          CHECK(y[t * 16 + r] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
        }
      }
    }
  }
}

TEST_CASE("AVX-512 VNNI is the default kernel set when the CPU has it") {
  const char* forced = std::getenv("EMBER_KERNELS");
  const std::string name = kernel_set_name(active_kernel_set());
  if (forced != nullptr) {
    MESSAGE("EMBER_KERNELS=" << forced << ": active set " << name);
    if (std::string(forced) == "avx2" || std::string(forced) == "scalar") CHECK(name == forced);
    return;
  }
  if (!cpu_has_avx512_vnni()) {
    MESSAGE("no AVX-512 VNNI on this CPU");
    CHECK(name != "avx512-vnni");
    return;
  }
  CHECK(name == "avx512-vnni");
  const Q4_0Panels* panels = q4_0_panels();
  REQUIRE(panels != nullptr);
  CHECK(panels->rows == 16);
}
#endif
