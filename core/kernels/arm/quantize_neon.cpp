// NEON activation quantizer and dequantizer for the Q4_0/Q8_0 path.
#include "core/kernels/arm/neon_helpers.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"

namespace ember::neon {

// The arithmetic of llama.cpp's ARM quantize_row_q8_0 (what its CPU backend runs on these
// machines): d = amax / 127 stored as half, q = x * (1 / d) rounded to nearest with ties to even
// (fcvtns). The scalar reference rounds ties away from zero; the two differ only on exact ties.
void from_float_q8_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<block_q8_0*>(dst);
  for (int64_t b = 0; b < n / kQK8_0; ++b, src += kQK8_0) {
    float32x4_t v[8];
    float32x4_t amax = vdupq_n_f32(0);
    #pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      v[k] = vld1q_f32(src + 4 * k);
      amax = vmaxq_f32(amax, vabsq_f32(v[k]));
    }
    const float d = vmaxvq_f32(amax) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = float_to_half(d);
    int16x8_t q16[4];
    #pragma GCC unroll 8
    for (int k = 0; k < 4; ++k) {
      const int32x4_t lo = vcvtnq_s32_f32(vmulq_n_f32(v[2 * k], id));
      const int32x4_t hi = vcvtnq_s32_f32(vmulq_n_f32(v[2 * k + 1], id));
      q16[k] = vcombine_s16(vqmovn_s32(lo), vqmovn_s32(hi));
    }
    vst1q_s8(blocks[b].qs, vcombine_s8(vqmovn_s16(q16[0]), vqmovn_s16(q16[1])));
    vst1q_s8(blocks[b].qs + 16, vcombine_s8(vqmovn_s16(q16[2]), vqmovn_s16(q16[3])));
  }
}

// (q - 8) * d per value, as the reference: the int -> float conversions are exact and the one
// multiply rounds the same way.
void to_float_q4_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const block_q4_0*>(src);
  for (int64_t b = 0; b < n / kQK4_0; ++b, dst += kQK4_0) {
    const float d = half_to_float(blocks[b].d);
    int8x16_t half[2];
    q4_0_unpack(blocks[b].qs, half[0], half[1]);
    #pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const int16x8_t w0 = vmovl_s8(vget_low_s8(half[h])), w1 = vmovl_high_s8(half[h]);
      vst1q_f32(dst + 16 * h, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w0))), d));
      vst1q_f32(dst + 16 * h + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(w0)), d));
      vst1q_f32(dst + 16 * h + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w1))), d));
      vst1q_f32(dst + 16 * h + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(w1)), d));
    }
  }
}

}  // namespace ember::neon
