#pragma once
// The integer dot products of the NEON sets, written once over the 16-byte dot primitive `Dot`:
// vec_dot_neon.cpp instantiates them with the ARMv8.0 widening multiply (dot_i8x16),
// vec_dot_dotprod.cpp with sdot. `Dot::apply(acc, x, y)` returns acc plus the 16 products
// x[i] * y[i] of signed bytes, spread over 4 int32 lanes in any way (only the lane total is used,
// so both give the same integers). Static templates: each file gets its own copy, built for its ISA
// level (neon_helpers.h says why that matters).
#include "core/kernels/arm/neon_helpers.h"
#include "core/kernels/quant_blocks.h"

namespace ember::neon {

// Per block: the exact int32 sum in 4 lanes, converted and scaled by d_w * d_x into a float
// accumulator; two blocks per step on two accumulators hide the fmla latency.
template <class Dot>
static float dot_q4_0_q8_0(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q4_0*>(row);
  const auto* x = static_cast<const block_q8_0*>(act);
  const int64_t nb = n / kQK4_0;
  auto block = [&](int64_t i, float32x4_t acc) {
    int8x16_t lo, hi;
    q4_0_unpack(w[i].qs, lo, hi);
    int32x4_t s = Dot::apply(vdupq_n_s32(0), lo, vld1q_s8(x[i].qs));
    s = Dot::apply(s, hi, vld1q_s8(x[i].qs + 16));
    return vfmaq_n_f32(acc, vcvtq_f32_s32(s), half_to_float(w[i].d) * half_to_float(x[i].d));
  };
  float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    acc0 = block(b, acc0);
    acc1 = block(b + 1, acc1);
  }
  if (b < nb) acc0 = block(b, acc0);
  return vaddvq_f32(vaddq_f32(acc0, acc1));
}

template <class Dot>
static float dot_q8_0_q8_0(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q8_0*>(row);
  const auto* x = static_cast<const block_q8_0*>(act);
  const int64_t nb = n / kQK8_0;
  auto block = [&](int64_t i, float32x4_t acc) {
    int32x4_t s = Dot::apply(vdupq_n_s32(0), vld1q_s8(w[i].qs), vld1q_s8(x[i].qs));
    s = Dot::apply(s, vld1q_s8(w[i].qs + 16), vld1q_s8(x[i].qs + 16));
    return vfmaq_n_f32(acc, vcvtq_f32_s32(s), half_to_float(w[i].d) * half_to_float(x[i].d));
  };
  float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    acc0 = block(b, acc0);
    acc1 = block(b + 1, acc1);
  }
  if (b < nb) acc0 = block(b, acc0);
  return vaddvq_f32(vaddq_f32(acc0, acc1));
}

// The 6-bit scales and mins of the 8 sub-blocks of a Q4_K block (the 12-byte packing of
// ggml-common.h: sub-blocks 0..3 in the low 6 bits of bytes 0..7, 4..7 split over bytes 8..11 and
// the top 2 bits of bytes 0..7).
static inline void q4_K_unpack_scales(const uint8_t* p, uint8_t* scale, uint8_t* min) {
  for (int j = 0; j < 4; ++j) {
    scale[j] = p[j] & 63;
    min[j] = p[j + 4] & 63;
    scale[j + 4] = static_cast<uint8_t>((p[j + 8] & 0x0F) | ((p[j] >> 6) << 4));
    min[j + 4] = static_cast<uint8_t>((p[j + 8] >> 4) | ((p[j + 4] >> 6) << 4));
  }
}

// Q4_K quants are 0..15 (no offset; the minimum is subtracted through the activation's group
// sums), so they enter the signed dot as they are. Per block: the scaled sub-block dots in int32
// lanes, the min term from the 16 bsums paired into 8; the float combination per block is the
// reference's, so only the order of the int32 additions differs (and those are exact).
template <class Dot>
static float dot_q4_K_q8_K(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q4_K*>(row);
  const auto* x = static_cast<const block_q8_K*>(act);
  const uint8x16_t low4 = vdupq_n_u8(0x0F);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint8_t scale[8], min[8];
    q4_K_unpack_scales(w[b].scales, scale, min);
    const int16x8_t pair_sums = vpaddq_s16(vld1q_s16(x[b].bsums), vld1q_s16(x[b].bsums + 8));
    const int16x8_t mins16 = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(min)));
    const int32x4_t min_products = vmlal_high_s16(vmull_s16(vget_low_s16(pair_sums), vget_low_s16(mins16)),
                                                  pair_sums, mins16);
    const int mins = vaddvq_s32(min_products);

    int32x4_t scaled = vdupq_n_s32(0);
    const uint8_t* q = w[b].qs;
    const int8_t* a = x[b].qs;
    #pragma GCC unroll 8
    for (int chunk = 0; chunk < 4; ++chunk, q += 32, a += 64) {
      const uint8x16_t bits0 = vld1q_u8(q), bits1 = vld1q_u8(q + 16);
      int32x4_t lo = Dot::apply(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(bits0, low4)), vld1q_s8(a));
      lo = Dot::apply(lo, vreinterpretq_s8_u8(vandq_u8(bits1, low4)), vld1q_s8(a + 16));
      int32x4_t hi = Dot::apply(vdupq_n_s32(0), vreinterpretq_s8_u8(vshrq_n_u8(bits0, 4)), vld1q_s8(a + 32));
      hi = Dot::apply(hi, vreinterpretq_s8_u8(vshrq_n_u8(bits1, 4)), vld1q_s8(a + 48));
      scaled = vmlaq_n_s32(scaled, lo, scale[2 * chunk]);
      scaled = vmlaq_n_s32(scaled, hi, scale[2 * chunk + 1]);
    }
    const int isum = vaddvq_s32(scaled);
    sum += x[b].d * half_to_float(w[b].d) * isum - x[b].d * half_to_float(w[b].dmin) * mins;
  }
  return sum;
}

// Q6_K: q = 4 low bits (ql) | 2 high bits (qh), minus 32, signed -32..31, in 16 groups of 16 with
// an int8 scale each. Half h of a block (128 values) takes ql[64h..64h+63] and qh[32h..32h+31];
// byte l of qh carries the high bits of values l, l+32, l+64, l+96 of the half (bits 0-1, 2-3,
// 4-5, 6-7), byte l of ql the low bits of values l and l+64 (low, high nibble), byte l+32 of ql
// those of values l+32 and l+96. Sums: |16 * 32 * 128 * 127| * 16 groups < 2^31.
template <class Dot>
static float dot_q6_K_q8_K(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q6_K*>(row);
  const auto* x = static_cast<const block_q8_K*>(act);
  const uint8x16_t low4 = vdupq_n_u8(0x0F), bits45 = vdupq_n_u8(0x30);
  const int8x16_t offset = vdupq_n_s8(32);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32x4_t isum = vdupq_n_s32(0);
    #pragma GCC unroll 8
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = w[b].ql + 64 * half;
      const uint8_t* qh = w[b].qh + 32 * half;
      const int8_t* a = x[b].qs + 128 * half;
      const int8_t* sc = w[b].scales + 8 * half;
      #pragma GCC unroll 8
      for (int p = 0; p < 2; ++p) {  // values 16p..16p+15 of each 32-value quarter
        const uint8x16_t l0 = vld1q_u8(ql + 16 * p), l1 = vld1q_u8(ql + 32 + 16 * p), h = vld1q_u8(qh + 16 * p);
        const uint8x16_t q[4] = {
            vorrq_u8(vandq_u8(l0, low4), vandq_u8(vshlq_n_u8(h, 4), bits45)),
            vorrq_u8(vandq_u8(l1, low4), vandq_u8(vshlq_n_u8(h, 2), bits45)),
            vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(h, bits45)),
            vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(h, 2), bits45)),
        };
        #pragma GCC unroll 8
        for (int k = 0; k < 4; ++k) {
          const int8x16_t qs = vsubq_s8(vreinterpretq_s8_u8(q[k]), offset);
          const int32x4_t d = Dot::apply(vdupq_n_s32(0), qs, vld1q_s8(a + 32 * k + 16 * p));
          isum = vmlaq_n_s32(isum, d, sc[2 * k + p]);
        }
      }
    }
    sum += half_to_float(w[b].d) * x[b].d * vaddvq_s32(isum);
  }
  return sum;
}

}  // namespace ember::neon
