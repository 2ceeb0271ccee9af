#pragma once
// Small AVX2 building blocks shared by the x86/ kernels. Only include from files compiled with
// -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include <cstdint>

namespace ember::avx2 {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

// The 32 4-bit quants of a Q4_0 block as bytes 0..15 in order: low nibbles fill the low lane
// (elements 0..15), high nibbles the high lane (elements 16..31).
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Eight int32 partial sums of x[i]*y[i] over 32 signed bytes. maddubs needs an unsigned left
// operand, so the sign of x moves onto y.
inline __m256i dot_i8_pairs(__m256i x, __m256i y) {
  const __m256i products = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
  return _mm256_madd_epi16(products, _mm256_set1_epi16(1));
}

}  // namespace ember::avx2
