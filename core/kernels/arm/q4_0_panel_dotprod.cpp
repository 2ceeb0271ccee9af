// Q4_0 panel products (layout in q4_0_panel.h) on sdot, for CPUs with the dot product but not
// i8mm. sdot sums groups of 4 bytes, so a panel vector (8 quant bytes of each of two rows) against
// a token's matching 8 activation bytes repeated in both halves leaves row 2p in lanes 0-1 and row
// 2p+1 in lanes 2-3; one pairwise add of the two row pairs gives the 4 rows' sums in order, which
// is y's layout (token-major), so a token's 4 results are one store. Built with
// -march=armv8.2-a+dotprod; called only after cpu_has_dotprod().
#include "core/kernels/arm/q4_0_panel.h"
#include "core/kernels/kernel_impl.h"

namespace ember::neon {
namespace {

template <int NT>
void panel_kernel(int64_t nb, const uint8_t* panel, const uint8_t* acts, size_t act_stride, float* y,
                  size_t y_stride) {
  const block_q8_0* x[NT];
  #pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const block_q8_0*>(acts + t * act_stride);
  float32x4_t acc[NT];
  #pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) acc[t] = vdupq_n_f32(0);
  for (int64_t b = 0; b < nb; ++b, panel += kPanel4BlockBytes) {
    const float32x4_t row_d = panel_scales(panel);
    // w[p][k]: rows 2p, 2p+1, elements 8k..8k+7 (half k & 1, low nibbles for k < 2).
    int8x16_t w[2][4];
    #pragma GCC unroll 8
    for (int p = 0; p < 2; ++p) {
      #pragma GCC unroll 8
      for (int h = 0; h < 2; ++h) {
        const int8x16_t v = vld1q_s8(reinterpret_cast<const int8_t*>(panel + 8 + 32 * h + 16 * p));
        w[p][h] = panel_low(v);
        w[p][h + 2] = panel_high(v);
      }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const int64x2_t lo = vreinterpretq_s64_s8(vld1q_s8(x[t][b].qs));
      const int64x2_t hi = vreinterpretq_s64_s8(vld1q_s8(x[t][b].qs + 16));
      // a[k]: elements 8k..8k+7 of the token, in both halves.
      const int8x16_t a[4] = {vreinterpretq_s8_s64(vdupq_laneq_s64(lo, 0)), vreinterpretq_s8_s64(vdupq_laneq_s64(lo, 1)),
                              vreinterpretq_s8_s64(vdupq_laneq_s64(hi, 0)), vreinterpretq_s8_s64(vdupq_laneq_s64(hi, 1))};
      int32x4_t s[2];
      #pragma GCC unroll 8
      for (int p = 0; p < 2; ++p) {
        s[p] = vdotq_s32(vdupq_n_s32(0), w[p][0], a[0]);
        #pragma GCC unroll 8
        for (int k = 1; k < 4; ++k) s[p] = vdotq_s32(s[p], w[p][k], a[k]);
      }
      const float32x4_t sums = vcvtq_n_f32_s32(vpaddq_s32(s[0], s[1]), 4);
      acc[t] = vfmaq_f32(acc[t], sums, vmulq_n_f32(row_d, half_to_float(x[t][b].d)));
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) vst1q_f32(y + t * y_stride, acc[t]);
}

}  // namespace

void panel_gemm_q4_0_dotprod(int64_t nb, const void* panel, const void* acts, size_t act_stride, const int32_t*,
                             size_t, int n_tokens, float* y, size_t y_stride) {
  const auto* p = static_cast<const uint8_t*>(panel);
  const auto* a = static_cast<const uint8_t*>(acts);
  switch (n_tokens) {
    case 4: panel_kernel<4>(nb, p, a, act_stride, y, y_stride); break;
    case 3: panel_kernel<3>(nb, p, a, act_stride, y, y_stride); break;
    case 2: panel_kernel<2>(nb, p, a, act_stride, y, y_stride); break;
    case 1: panel_kernel<1>(nb, p, a, act_stride, y, y_stride); break;
    default: break;
  }
}

}  // namespace ember::neon
