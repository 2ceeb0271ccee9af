// Prefill register tiles for the 32-element block types (Q4_0, Q8_0) against Q8_0 activations:
// 4 weight rows x 4 tokens. Each weight block is unpacked once and multiplied with all four
// tokens' blocks, so the unpacking and the activations' sign work are shared; per (row, token)
// pair the cost is one sign, one maddubs and one madd.
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/x86/avx2_helpers.h"

namespace ember::avx2 {
namespace {

// The 32 quants of a weight block as signed bytes.
inline __m256i signed_quants(const block_q4_0& b) { return _mm256_sub_epi8(unpack_nibbles(b.qs), _mm256_set1_epi8(8)); }
inline __m256i signed_quants(const block_q8_0& b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
}

template <class Block>
void tile_4x4(int64_t n, const uint8_t* row_bytes, size_t row_stride, const uint8_t* act_bytes, size_t act_stride,
              float* out, size_t out_stride) {
  const Block* w[4];
  const block_q8_0* x[4];
  for (int i = 0; i < 4; ++i) {
    w[i] = reinterpret_cast<const Block*>(row_bytes + i * row_stride);
    x[i] = reinterpret_cast<const block_q8_0*>(act_bytes + i * act_stride);
  }
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < n / 32; ++b) {
    __m256i a[4], a_abs[4];
    for (int t = 0; t < 4; ++t) {
      a[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].qs));
      a_abs[t] = _mm256_sign_epi8(a[t], a[t]);
    }
    // The four tokens' scales, repeated in both 128-bit lanes to match the hadd layout below.
    const __m128 act_d = _mm_cvtph_ps(_mm_setr_epi16(static_cast<short>(x[0][b].d), static_cast<short>(x[1][b].d),
                                                     static_cast<short>(x[2][b].d), static_cast<short>(x[3][b].d), 0, 0, 0, 0));
    const __m256 act_d2 = _mm256_set_m128(act_d, act_d);
    for (int r = 0; r < 4; ++r) {
      const __m256i q = signed_quants(w[r][b]);
      __m256i p[4];
      for (int t = 0; t < 4; ++t) p[t] = _mm256_madd_epi16(_mm256_maddubs_epi16(a_abs[t], _mm256_sign_epi8(q, a[t])), ones);
      // Lane i (i < 4) holds token i's low-half sum, lane 4 + i its high-half sum.
      const __m256i sums = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
      const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(half_to_float(w[r][b].d)), act_d2);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc[r]);
    }
  }
  for (int r = 0; r < 4; ++r) {
    _mm_storeu_ps(out + r * out_stride, _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1)));
  }
}

template <class Block, float (*VecDot)(int64_t, const void*, const void*)>
void tile(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts, size_t act_stride, int n_tokens,
          float* out, size_t out_stride) {
  const auto* row_bytes = static_cast<const uint8_t*>(rows);
  const auto* act_bytes = static_cast<const uint8_t*>(acts);
  if (n_rows == 4 && n_tokens == 4) {
    tile_4x4<Block>(n, row_bytes, row_stride, act_bytes, act_stride, out, out_stride);
    return;
  }
  for (int r = 0; r < n_rows; ++r) {  // edge tiles: plain dot products
    for (int t = 0; t < n_tokens; ++t) {
      out[r * out_stride + t] = VecDot(n, row_bytes + r * row_stride, act_bytes + t * act_stride);
    }
  }
}

}  // namespace

void gemm_tile_q4_0_q8_0(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                         size_t act_stride, int n_tokens, float* out, size_t out_stride) {
  tile<block_q4_0, vec_dot_q4_0_q8_0>(n, rows, row_stride, n_rows, acts, act_stride, n_tokens, out, out_stride);
}

void gemm_tile_q8_0_q8_0(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                         size_t act_stride, int n_tokens, float* out, size_t out_stride) {
  tile<block_q8_0, vec_dot_q8_0_q8_0>(n, rows, row_stride, n_rows, acts, act_stride, n_tokens, out, out_stride);
}

}  // namespace ember::avx2
