// The Q4_0 prefill tile with AVX-VNNI (vpdpbusd: u8 x s8 products summed into int32 in one
// instruction). Compiled for AVX2 like the rest of x86/; only these functions also target
// avxvnni, and they are called only when the CPU reports it (see gemm_tile_kernel()).
//
// The weights' unsigned nibbles q (0..15) go in directly; the -8 offset enters through the
// accumulator's starting value, -8 * sum(a), computed once per token and block.
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/x86/avx2_helpers.h"

#define EMBER_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

namespace ember::avx2 {

EMBER_AVXVNNI void gemm_tile_q4_0_q8_0_vnni(int64_t n, const void* rows, size_t row_stride, int n_rows,
                                            const void* acts, size_t act_stride, int n_tokens, float* out,
                                            size_t out_stride) {
  if (n_rows != 4 || n_tokens != 4) {
    gemm_tile_q4_0_q8_0(n, rows, row_stride, n_rows, acts, act_stride, n_tokens, out, out_stride);
    return;
  }
  const auto* row_bytes = static_cast<const uint8_t*>(rows);
  const auto* act_bytes = static_cast<const uint8_t*>(acts);
  const block_q4_0* w[4];
  const block_q8_0* x[4];
  for (int i = 0; i < 4; ++i) {
    w[i] = reinterpret_cast<const block_q4_0*>(row_bytes + i * row_stride);
    x[i] = reinterpret_cast<const block_q8_0*>(act_bytes + i * act_stride);
  }
  const __m256i eight = _mm256_set1_epi8(8);
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  const int64_t nb = n / kQK4_0;
  for (int64_t b = 0; b < nb; ++b) {
    __m256i a[4], offset[4];
    for (int t = 0; t < 4; ++t) {
      a[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].qs));
      // 8 * (-a): |a| <= 127 for Q8_0, so the negation cannot overflow.
      offset[t] = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), eight, _mm256_sub_epi8(_mm256_setzero_si256(), a[t]));
    }
    const __m128 act_d = _mm_cvtph_ps(_mm_setr_epi16(static_cast<short>(x[0][b].d), static_cast<short>(x[1][b].d),
                                                     static_cast<short>(x[2][b].d), static_cast<short>(x[3][b].d), 0, 0, 0, 0));
    const __m256 act_d2 = _mm256_set_m128(act_d, act_d);
    for (int r = 0; r < 4; ++r) {
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[r][b].qs));
      const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), low_nibbles);
      __m256i p[4];
      for (int t = 0; t < 4; ++t) p[t] = _mm256_dpbusd_avx_epi32(offset[t], q, a[t]);
      // Lane i (i < 4) holds token i's low-half sum, lane 4 + i its high-half sum.
      const __m256i sums = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
      const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(half_to_float(w[r][b].d)), act_d2);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc[r]);
    }
  }
  for (int r = 0; r < 4; ++r) {
    const __m128 both = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
    _mm_storeu_ps(out + r * out_stride, both);
  }
}

bool cpu_has_avxvnni() {
  static const bool supported = __builtin_cpu_supports("avxvnni");
  return supported;
}

}  // namespace ember::avx2
