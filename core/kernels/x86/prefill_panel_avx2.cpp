// The Q4_0 panel kernel (layout in prefill_panel_avxvnni.cpp) for AVX2 CPUs without AVX-VNNI:
// maddubs + madd + add in place of vpdpbusd.
#include "core/kernels/kernel_impl.h"
#include "core/kernels/x86/avx2_helpers.h"

#define EMBER_PANEL_TARGET

namespace ember::avx2 {
namespace {

struct Avx2 {
  // u8 <= 15 here, so the int16 pair sums of maddubs cannot saturate.
  static __m256i dot4(__m256i acc, __m256i u8, __m256i s8) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1)));
  }
};

}  // namespace
}  // namespace ember::avx2

#include "core/kernels/x86/panel_kernel.h"

namespace ember::avx2 {

void panel_gemm_q4_0_avx2(int64_t nb, const void* panel, const void* acts, size_t act_stride, const int32_t* bias_sums,
                          size_t sums_stride, int n_tokens, float* y, size_t y_stride) {
  panel_dispatch<Avx2>(nb, panel, acts, act_stride, bias_sums, sums_stride, n_tokens, y, y_stride);
}

}  // namespace ember::avx2
