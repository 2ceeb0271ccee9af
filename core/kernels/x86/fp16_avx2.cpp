// F16C row conversions (round to nearest even, identical to the scalar fp16.cpp ones).
#include "core/kernels/kernel_impl.h"
#include "core/kernels/x86/avx2_helpers.h"

namespace ember::avx2 {

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

void to_float_f16(const void* src, float* dst, int64_t n) {
  fp16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n);
}

void from_float_f16(const float* src, void* dst, int64_t n) {
  fp32_to_fp16_row(src, static_cast<uint16_t*>(dst), n);
}

}  // namespace ember::avx2
