// Q4_0 panel products (layout in q4_0_panel.h) on smmla: vmmlaq_s32(acc, w, a) adds the 2x2 tile
// of dot products of w's two 8-byte halves (two rows' quants) with a's (two tokens' activations),
// so one instruction does the 32 multiplies that take two sdot. Tokens go in pairs; an odd last
// token is paired with itself and the duplicate's results are dropped (a lone token goes to the sdot
// kernel). Built with
// -march=armv8.2-a+i8mm; called only after cpu_has_i8mm().
#include "core/kernels/arm/q4_0_panel.h"
#include "core/kernels/kernel_impl.h"

namespace ember::neon {
namespace {

template <int NT>
void panel_kernel(int64_t nb, const uint8_t* panel, const uint8_t* acts, size_t act_stride, float* y,
                  size_t y_stride) {
  constexpr int NP = (NT + 1) / 2;  // token pairs
  const block_q8_0* x[2 * NP];
  #pragma GCC unroll 8
  for (int t = 0; t < 2 * NP; ++t) {
    x[t] = reinterpret_cast<const block_q8_0*>(acts + (t < NT ? t : NT - 1) * act_stride);
  }
  // acc[p][q]: rows 2p, 2p+1 against tokens 2q, 2q+1, lanes (row, token) = 00, 01, 10, 11.
  float32x4_t acc[2][NP];
  #pragma GCC unroll 8
  for (int q = 0; q < NP; ++q) acc[0][q] = acc[1][q] = vdupq_n_f32(0);
  for (int64_t b = 0; b < nb; ++b, panel += kPanel4BlockBytes) {
    const float32x4_t row_d = panel_scales(panel);
    const float32x4_t pair_d[2] = {vzip1q_f32(row_d, row_d), vzip2q_f32(row_d, row_d)};  // d0 d0 d1 d1, d2 d2 d3 d3
    // w[p][k]: rows 2p, 2p+1, elements 8k..8k+7 (half h = k & 1, low nibbles for k < 2).
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
    for (int q = 0; q < NP; ++q) {
      const block_q8_0& x0 = x[2 * q][b];
      const block_q8_0& x1 = x[2 * q + 1][b];
      const int64x2_t a0lo = vreinterpretq_s64_s8(vld1q_s8(x0.qs)), a0hi = vreinterpretq_s64_s8(vld1q_s8(x0.qs + 16));
      const int64x2_t a1lo = vreinterpretq_s64_s8(vld1q_s8(x1.qs)), a1hi = vreinterpretq_s64_s8(vld1q_s8(x1.qs + 16));
      // a[k]: elements 8k..8k+7 of token 2q, then of token 2q+1.
      const int8x16_t a[4] = {vreinterpretq_s8_s64(vzip1q_s64(a0lo, a1lo)), vreinterpretq_s8_s64(vzip2q_s64(a0lo, a1lo)),
                              vreinterpretq_s8_s64(vzip1q_s64(a0hi, a1hi)), vreinterpretq_s8_s64(vzip2q_s64(a0hi, a1hi))};
      const uint16_t halves[4] = {x0.d, x1.d, x0.d, x1.d};
      const float32x4_t token_d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(halves)));
      #pragma GCC unroll 8
      for (int p = 0; p < 2; ++p) {
        int32x4_t s = vmmlaq_s32(vdupq_n_s32(0), w[p][0], a[0]);
        #pragma GCC unroll 8
        for (int k = 1; k < 4; ++k) s = vmmlaq_s32(s, w[p][k], a[k]);
        acc[p][q] = vfmaq_f32(acc[p][q], vcvtq_n_f32_s32(s, 4), vmulq_f32(pair_d[p], token_d));
      }
    }
  }
  #pragma GCC unroll 8
  for (int q = 0; q < NP; ++q) {
    // Lanes 0 and 2 of both row pairs are token 2q's rows 0..3, lanes 1 and 3 token 2q+1's.
    vst1q_f32(y + 2 * q * y_stride, vuzp1q_f32(acc[0][q], acc[1][q]));
    if (2 * q + 1 < NT) vst1q_f32(y + (2 * q + 1) * y_stride, vuzp2q_f32(acc[0][q], acc[1][q]));
  }
}

}  // namespace

void panel_gemm_q4_0_i8mm(int64_t nb, const void* panel, const void* acts, size_t act_stride, const int32_t*,
                          size_t, int n_tokens, float* y, size_t y_stride) {
  const auto* p = static_cast<const uint8_t*>(panel);
  const auto* a = static_cast<const uint8_t*>(acts);
  switch (n_tokens) {
    case 4: panel_kernel<4>(nb, p, a, act_stride, y, y_stride); break;
    case 3: panel_kernel<3>(nb, p, a, act_stride, y, y_stride); break;
    case 2: panel_kernel<2>(nb, p, a, act_stride, y, y_stride); break;
    // One token (decode from the repacked copy) would waste half of every smmla on the duplicate:
    // the sdot kernel does it in fewer instructions (11.2 against 12.3 per row-block under qemu; 11.3 through this call),
    // with the same result bit for bit, and every i8mm CPU has sdot (cpu_has_i8mm()).
    case 1: panel_gemm_q4_0_dotprod(nb, panel, acts, act_stride, nullptr, 0, 1, y, y_stride); break;
    default: break;
  }
}

}  // namespace ember::neon
