// Half <-> float rows with the ARMv8.0 vector conversions (fcvtl / fcvtn, round to nearest even
// under the default FPCR): the same bits as fp16.cpp's scalar functions.
#include "core/kernels/arm/neon_helpers.h"
#include "core/kernels/kernel_impl.h"

namespace ember::neon {

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(src + i));
    vst1q_f32(dst + i, vcvt_f32_f16(vget_low_f16(h)));
    vst1q_f32(dst + i + 4, vcvt_high_f32_f16(h));
  }
  for (; i < n; ++i) dst[i] = half_to_float(src[i]);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(src + i)), vld1q_f32(src + i + 4));
    vst1q_u16(dst + i, vreinterpretq_u16_f16(h));
  }
  for (; i < n; ++i) dst[i] = float_to_half(src[i]);
}

void to_float_f16(const void* src, float* dst, int64_t n) {
  fp16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n);
}

void from_float_f16(const float* src, void* dst, int64_t n) {
  fp32_to_fp16_row(src, static_cast<uint16_t*>(dst), n);
}

}  // namespace ember::neon
