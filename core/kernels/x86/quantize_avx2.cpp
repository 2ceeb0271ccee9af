// AVX2 activation quantizer and dequantizer for the Q4_0/Q8_0 path.
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/x86/avx2_helpers.h"

namespace ember::avx2 {

// Same arithmetic as llama.cpp's x86 quantize_row_q8_0 (the one its CPU backend runs here):
// d = amax/127 stored as half, q = x * (127/amax) rounded to nearest even. The scalar reference
// uses 1/d and round-half-away; the two differ only on exact ties.
void from_float_q8_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<block_q8_0*>(dst);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / kQK8_0; ++b, src += kQK8_0) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(src + 8 * k);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_bit, v[k]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float max_abs = _mm_cvtss_f32(m);
    blocks[b].d = _cvtss_sh(max_abs / 127.0f, _MM_FROUND_TO_NEAREST_INT);
    const __m256 scale = _mm256_set1_ps(max_abs != 0.0f ? 127.0f / max_abs : 0.0f);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // The packs interleave 128-bit lanes; the permute restores element order.
    const __m256i packed16_a = _mm256_packs_epi32(q[0], q[1]);
    const __m256i packed16_b = _mm256_packs_epi32(q[2], q[3]);
    __m256i packed8 = _mm256_packs_epi16(packed16_a, packed16_b);
    packed8 = _mm256_permutevar8x32_epi32(packed8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(blocks[b].qs), packed8);
  }
}

void to_float_q4_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const block_q4_0*>(src);
  for (int64_t b = 0; b < n / kQK4_0; ++b, dst += kQK4_0) {
    const __m256 d = _mm256_set1_ps(half_to_float(blocks[b].d));
    const __m256i q = _mm256_sub_epi8(unpack_nibbles(blocks[b].qs), _mm256_set1_epi8(8));
    const __m128i lo = _mm256_castsi256_si128(q);
    const __m128i hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(dst + 0, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
    _mm256_storeu_ps(dst + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
    _mm256_storeu_ps(dst + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
    _mm256_storeu_ps(dst + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
  }
}

}  // namespace ember::avx2
