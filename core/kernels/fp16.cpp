#include "core/kernels/fp16.h"

#include <cstring>

#include "core/kernels/cpu_features.h"
#include "core/kernels/kernel_impl.h"

namespace ember {
namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  const uint32_t mantissa = h & 0x3FF;
  if (exponent == 0x1F) return bits_float(sign | 0x7F800000 | (mantissa << 13));  // inf / NaN
  if (exponent != 0) return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Subnormal (or zero): mantissa * 2^-24 is exact in float.
  const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
  return sign ? -magnitude : magnitude;
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t magnitude = x & 0x7FFFFFFF;
  if (magnitude > 0x7F800000) {
    // NaN: keep the top payload bits and make it quiet, as the F16C instruction does.
    return static_cast<uint16_t>(sign | 0x7E00 | ((magnitude >> 13) & 0x3FF));
  }
  // 0x477FF000 is halfway between 65504 (largest half) and 65536; the tie goes to the even "inf".
  if (magnitude >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);
  if (magnitude < 0x38800000) {  // below the smallest normal half: result is subnormal or zero
    const uint32_t exponent = magnitude >> 23;
    if (exponent == 0) return sign;  // float subnormals are far below half's range
    const uint32_t mantissa = (magnitude & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - exponent;  // >= 14
    if (shift > 24) return sign;
    uint32_t q = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = (magnitude - 0x38000000) >> 13;  // rebias exponent 127 -> 15, drop 13 mantissa bits
  const uint32_t rest = magnitude & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry correctly bumps the exponent
  return static_cast<uint16_t>(sign | h);
}

float bf16_to_fp32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((u >> 16) | 64);  // quiet NaN
  return static_cast<uint16_t>((u + (0x7FFF + ((u >> 16) & 1))) >> 16);
}

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
#ifdef EMBER_HAVE_X86_SIMD
  if (cpu_has_avx2_fma_f16c()) {
    avx2::fp16_to_fp32_row(src, dst, n);
    return;
  }
#endif
#ifdef EMBER_HAVE_ARM_NEON
  if (cpu_has_neon()) {
    neon::fp16_to_fp32_row(src, dst, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
#ifdef EMBER_HAVE_X86_SIMD
  if (cpu_has_avx2_fma_f16c()) {
    avx2::fp32_to_fp16_row(src, dst, n);
    return;
  }
#endif
#ifdef EMBER_HAVE_ARM_NEON
  if (cpu_has_neon()) {
    neon::fp32_to_fp16_row(src, dst, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

const float* fp16_to_fp32_table() {
  // Static storage filled in place: no heap allocation, even when the first call comes from a
  // decode step.
  struct Table {
    float values[65536];
    Table() {
      for (uint32_t h = 0; h < 65536; ++h) values[h] = fp16_to_fp32(static_cast<uint16_t>(h));
    }
  };
  static const Table table;
  return table.values;
}

}  // namespace ember
