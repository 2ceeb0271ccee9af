// NEON version of attention_group_f16: the same three passes as the reference (scores, softmax,
// weighted sum of values), 4 lanes at a time, with a polynomial exp.
#include <cmath>

#include "core/kernels/arm/neon_helpers.h"
#include "core/kernels/attention.h"
#include "core/kernels/fp16.h"

namespace ember::neon {
namespace {

// e^x for x <= 0 (softmax arguments), relative error ~2e-7. x = k ln2 + r with k the nearest
// integer to x / ln2 and |r| <= ln2 / 2 (ln2 split in two parts so that r is exact to a few ulp);
// e^r from its Taylor series to r^6 (the first omitted term is below 2e-8 there); 2^k by building
// the exponent field. Below -87 the result flushes to 0, as expf underflows there too.
float32x4_t exp_neg(float32x4_t x) {
  const float32x4_t floor_arg = vdupq_n_f32(-87.0f);
  const uint32x4_t underflow = vcltq_f32(x, floor_arg);
  x = vmaxq_f32(x, floor_arg);
  const float32x4_t k = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
  float32x4_t r = vfmsq_f32(x, k, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, k, vdupq_n_f32(-2.12194440e-4f));
  static const float kCoeff[] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
  float32x4_t p = vdupq_n_f32(kCoeff[0]);
  for (int i = 1; i < 7; ++i) p = vfmaq_f32(vdupq_n_f32(kCoeff[i]), p, r);
  const int32x4_t exponent = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(k), vdupq_n_s32(127)), 23);
  const float32x4_t result = vmulq_f32(p, vreinterpretq_f32_s32(exponent));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(result), underflow));
}

void convert_row(const uint16_t* src, float* dst, int64_t d) {
  int64_t i = 0;
  for (; i + 4 <= d; i += 4) vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
  for (; i < d; ++i) dst[i] = half_to_float(src[i]);
}

}  // namespace

void attention_group_f16(const AttentionGroupArgs& a) {
  const int64_t d = a.head_dim, d4 = d & ~int64_t{3};
  for (int64_t i = 0; i < a.n_q * d; ++i) a.qf[i] = half_to_float(float_to_half(a.q[i]));

  // Scores: each key row converted once, dotted with every query of the group.
  for (int64_t j = 0; j < a.n_kv; ++j) {
    convert_row(a.k + j * a.kv_stride, a.row, d);
    for (int64_t h = 0; h < a.n_q; ++h) {
      const float* q = a.qf + h * d;
      float32x4_t acc = vdupq_n_f32(0);
      for (int64_t i = 0; i < d4; i += 4) acc = vfmaq_f32(acc, vld1q_f32(a.row + i), vld1q_f32(q + i));
      float s = vaddvq_f32(acc);
      for (int64_t i = d4; i < d; ++i) s += a.row[i] * q[i];
      a.scores[h * a.n_kv + j] = s * a.scale;
    }
  }

  // Softmax per query head.
  const int64_t n4 = a.n_kv & ~int64_t{3};
  for (int64_t h = 0; h < a.n_q; ++h) {
    float* s = a.scores + h * a.n_kv;
    float32x4_t vm = vdupq_n_f32(-INFINITY);
    for (int64_t j = 0; j < n4; j += 4) vm = vmaxq_f32(vm, vld1q_f32(s + j));
    float m = vmaxvq_f32(vm);
    for (int64_t j = n4; j < a.n_kv; ++j) m = s[j] > m ? s[j] : m;
    const float32x4_t mm = vdupq_n_f32(m);
    float32x4_t vsum = vdupq_n_f32(0);
    for (int64_t j = 0; j < n4; j += 4) {
      const float32x4_t e = exp_neg(vsubq_f32(vld1q_f32(s + j), mm));
      vst1q_f32(s + j, e);
      vsum = vaddq_f32(vsum, e);
    }
    float sum = vaddvq_f32(vsum);
    for (int64_t j = n4; j < a.n_kv; ++j) {
      s[j] = std::exp(s[j] - m);
      sum += s[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < n4; j += 4) vst1q_f32(s + j, vmulq_n_f32(vld1q_f32(s + j), inv));
    for (int64_t j = n4; j < a.n_kv; ++j) s[j] *= inv;
    for (int64_t i = 0; i < d; ++i) a.out[h * d + i] = 0.0f;
  }

  // Weighted sum of values: each value row converted once, accumulated into every head.
  for (int64_t j = 0; j < a.n_kv; ++j) {
    convert_row(a.v + j * a.kv_stride, a.row, d);
    for (int64_t h = 0; h < a.n_q; ++h) {
      float* o = a.out + h * d;
      const float p = a.scores[h * a.n_kv + j];
      for (int64_t i = 0; i < d4; i += 4) vst1q_f32(o + i, vfmaq_n_f32(vld1q_f32(o + i), vld1q_f32(a.row + i), p));
      for (int64_t i = d4; i < d; ++i) o[i] += p * a.row[i];
    }
  }
}

}  // namespace ember::neon
