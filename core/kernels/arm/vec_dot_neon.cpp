// ARMv8.0 NEON dot products (no dot product extension); each has a scalar twin in
// generic/vec_dot_generic.cpp that the tests compare it against. The int8 ones (int8_dots.h) widen
// through int16 here (dot_i8x16); vec_dot_dotprod.cpp has the sdot versions.
#include "core/kernels/arm/int8_dots.h"
#include "core/kernels/arm/neon_helpers.h"
#include "core/kernels/fp16.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"

namespace ember::neon {

// Four accumulators (16 floats per step): one fmla has 4 cycles of latency on most cores, and
// four independent chains keep the two FP pipes busy.
float vec_dot_f32(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const float*>(row);
  const auto* x = static_cast<const float*>(act);
  float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    #pragma GCC unroll 8
    for (int k = 0; k < 4; ++k) acc[k] = vfmaq_f32(acc[k], vld1q_f32(w + i + 4 * k), vld1q_f32(x + i + 4 * k));
  }
  for (; i + 4 <= n; i += 4) acc[0] = vfmaq_f32(acc[0], vld1q_f32(w + i), vld1q_f32(x + i));
  float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
  for (; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

// Halves widened with fcvtl (ARMv8.0 base, exact): 8 per load, two float vectors.
float vec_dot_f16(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const uint16_t*>(row);
  const auto* x = static_cast<const uint16_t*>(act);
  float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    #pragma GCC unroll 8
    for (int k = 0; k < 2; ++k) {
      const float16x8_t wh = vreinterpretq_f16_u16(vld1q_u16(w + i + 8 * k));
      const float16x8_t xh = vreinterpretq_f16_u16(vld1q_u16(x + i + 8 * k));
      acc[2 * k] = vfmaq_f32(acc[2 * k], vcvt_f32_f16(vget_low_f16(wh)), vcvt_f32_f16(vget_low_f16(xh)));
      acc[2 * k + 1] = vfmaq_f32(acc[2 * k + 1], vcvt_high_f32_f16(wh), vcvt_high_f32_f16(xh));
    }
  }
  for (; i + 4 <= n; i += 4) {
    const float16x4_t wh = vreinterpret_f16_u16(vld1_u16(w + i));
    const float16x4_t xh = vreinterpret_f16_u16(vld1_u16(x + i));
    acc[0] = vfmaq_f32(acc[0], vcvt_f32_f16(wh), vcvt_f32_f16(xh));
  }
  float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
  for (; i < n; ++i) sum += half_to_float(w[i]) * half_to_float(x[i]);
  return sum;
}

// bfloat16 is the top half of a float: a widening shift left by 16 is the exact conversion.
float vec_dot_bf16(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const uint16_t*>(row);
  const auto* x = static_cast<const uint16_t*>(act);
  auto lo = [](uint16x8_t v) { return vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16)); };
  auto hi = [](uint16x8_t v) { return vreinterpretq_f32_u32(vshll_high_n_u16(v, 16)); };
  float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    #pragma GCC unroll 8
    for (int k = 0; k < 2; ++k) {
      const uint16x8_t wv = vld1q_u16(w + i + 8 * k), xv = vld1q_u16(x + i + 8 * k);
      acc[2 * k] = vfmaq_f32(acc[2 * k], lo(wv), lo(xv));
      acc[2 * k + 1] = vfmaq_f32(acc[2 * k + 1], hi(wv), hi(xv));
    }
  }
  float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
  for (; i < n; ++i) sum += bf16_to_fp32(w[i]) * bf16_to_fp32(x[i]);
  return sum;
}

namespace {
struct WideningDot {
  static int32x4_t apply(int32x4_t acc, int8x16_t x, int8x16_t y) { return dot_i8x16(acc, x, y); }
};
}  // namespace

float vec_dot_q4_0_q8_0(int64_t n, const void* row, const void* act) {
  return dot_q4_0_q8_0<WideningDot>(n, row, act);
}
float vec_dot_q8_0_q8_0(int64_t n, const void* row, const void* act) {
  return dot_q8_0_q8_0<WideningDot>(n, row, act);
}
float vec_dot_q4_K_q8_K(int64_t n, const void* row, const void* act) {
  return dot_q4_K_q8_K<WideningDot>(n, row, act);
}
float vec_dot_q6_K_q8_K(int64_t n, const void* row, const void* act) {
  return dot_q6_K_q8_K<WideningDot>(n, row, act);
}

}  // namespace ember::neon
