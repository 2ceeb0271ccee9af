#pragma once
// Small NEON building blocks shared by the arm/ kernels. The functions are static: the baseline
// files and the *_dotprod.cpp files are built for different ISA levels, and an inline function with
// external linkage could end up as one copy for all of them (the ARMv8.2 one, on an ARMv8.0 CPU).
// The kernels mark their loops over register arrays "#pragma GCC unroll": at -O2 (RelWithDebInfo)
// GCC leaves them rolled, with the arrays on the stack (3x the instructions of vec_dot_f32).
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace ember::neon {

// IEEE half -> float with the scalar fcvt (ARMv8.0 base): exact, subnormals included.
static inline float half_to_float(uint16_t h) {
  __fp16 f;
  std::memcpy(&f, &h, sizeof f);
  return static_cast<float>(f);
}

// float -> IEEE half rounded to nearest even (the FPCR default), as fp32_to_fp16().
static inline uint16_t float_to_half(float x) {
  const __fp16 f = static_cast<__fp16>(x);
  uint16_t h;
  std::memcpy(&h, &f, sizeof h);
  return h;
}

// acc + the 16 products x[i] * y[i] of signed bytes, in 4 int32 lanes. Without sdot: two widening
// multiplies to int16 (|x * y| <= 16384 fits) and two pairwise widening adds.
static inline int32x4_t dot_i8x16(int32x4_t acc, int8x16_t x, int8x16_t y) {
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(x), vget_low_s8(y)));
  return vpadalq_s16(acc, vmull_high_s8(x, y));
}

// The 32 quants of a Q4_0 block minus 8, as signed bytes: elements 0..15 (low nibbles) in lo,
// 16..31 (high nibbles) in hi.
static inline void q4_0_unpack(const uint8_t* qs, int8x16_t& lo, int8x16_t& hi) {
  const uint8x16_t packed = vld1q_u8(qs);
  const int8x16_t eight = vdupq_n_s8(8);
  lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0F))), eight);
  hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(packed, 4)), eight);
}

}  // namespace ember::neon
