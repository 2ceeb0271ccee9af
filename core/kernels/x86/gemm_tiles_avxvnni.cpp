// Q4_0/Q8_0 kernels with AVX-VNNI (vpdpbusd: u8 x s8 products summed into int32 in one
// instruction). This file is compiled for AVX2 like the rest of x86/; only these functions also
// target avxvnni, and they are called only when the CPU reports it (gemm_tile_kernel() and
// gemv_rows_kernel() check cpu_has_avx_vnni()).
//
// Weights go in as unsigned bytes u = q + bias (Q4_0: the raw nibble, bias 8; Q8_0: q ^ 0x80,
// bias 128); the bias comes back out through the accumulator's starting value, -bias * sum(a),
// computed once per activation block and shared by every weight row.
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/x86/avx2_helpers.h"

#define EMBER_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

namespace ember::avx2 {
namespace {

EMBER_AVXVNNI inline __m256i biased_quants(const block_q4_0& b) { return unpack_nibbles(b.qs); }
EMBER_AVXVNNI inline __m256i biased_quants(const block_q8_0& b) {
  return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)), _mm256_set1_epi8(-128));
}
template <class Block>
constexpr char kBias = sizeof(Block) == sizeof(block_q4_0) ? 8 : -128;  // -128 is 0x80 = 128 unsigned

// -bias * a, summed in groups of four: |a| <= 127 for Q8_0, so negating a cannot overflow.
template <class Block>
EMBER_AVXVNNI inline __m256i bias_offset(__m256i a) {
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(kBias<Block>),
                                 _mm256_sub_epi8(_mm256_setzero_si256(), a));
}

template <class Block>
EMBER_AVXVNNI void tile_4x4(int64_t n, const uint8_t* row_bytes, size_t row_stride, const uint8_t* act_bytes,
                            size_t act_stride, float* out, size_t out_stride) {
  const Block* w[4];
  const block_q8_0* x[4];
  for (int i = 0; i < 4; ++i) {
    w[i] = reinterpret_cast<const Block*>(row_bytes + i * row_stride);
    x[i] = reinterpret_cast<const block_q8_0*>(act_bytes + i * act_stride);
  }
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < n / 32; ++b) {
    __m256i a[4], offset[4];
    for (int t = 0; t < 4; ++t) {
      a[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].qs));
      offset[t] = bias_offset<Block>(a[t]);
    }
    const __m128 act_d = _mm_cvtph_ps(_mm_setr_epi16(static_cast<short>(x[0][b].d), static_cast<short>(x[1][b].d),
                                                     static_cast<short>(x[2][b].d), static_cast<short>(x[3][b].d), 0, 0, 0, 0));
    const __m256 act_d2 = _mm256_set_m128(act_d, act_d);
    for (int r = 0; r < 4; ++r) {
      const __m256i q = biased_quants(w[r][b]);
      __m256i p[4];
      for (int t = 0; t < 4; ++t) p[t] = _mm256_dpbusd_avx_epi32(offset[t], q, a[t]);
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

// Decode: rows against one activation row, one row at a time so that the weights stream through
// memory in a single sequential pass (interleaving several short rows measured slower from DRAM:
// the hardware prefetcher keeps up with one long stream better than with four short ones).
template <class Block>
EMBER_AVXVNNI void gemv(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out) {
  const auto* row_bytes = static_cast<const uint8_t*>(rows);
  const auto* x = static_cast<const block_q8_0*>(act);
  const int64_t nb = n / 32;
  for (int r = 0; r < n_rows; ++r) {
    const Block* w = reinterpret_cast<const Block*>(row_bytes + r * row_stride);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {  // two blocks on independent accumulators hide the FMA latency
      const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
      const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b + 1].qs));
      const __m256i p0 = _mm256_dpbusd_avx_epi32(bias_offset<Block>(a0), biased_quants(w[b]), a0);
      const __m256i p1 = _mm256_dpbusd_avx_epi32(bias_offset<Block>(a1), biased_quants(w[b + 1]), a1);
      acc0 = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(w[b].d) * half_to_float(x[b].d)), _mm256_cvtepi32_ps(p0), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(w[b + 1].d) * half_to_float(x[b + 1].d)),
                             _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; b < nb; ++b) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
      const __m256i p = _mm256_dpbusd_avx_epi32(bias_offset<Block>(a), biased_quants(w[b]), a);
      acc0 = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(w[b].d) * half_to_float(x[b].d)), _mm256_cvtepi32_ps(p), acc0);
    }
    out[r] = hsum(_mm256_add_ps(acc0, acc1));
  }
}

template <class Block>
EMBER_AVXVNNI void tile(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts, size_t act_stride,
                        int n_tokens, float* out, size_t out_stride) {
  const auto* row_bytes = static_cast<const uint8_t*>(rows);
  const auto* act_bytes = static_cast<const uint8_t*>(acts);
  if (n_rows == 4 && n_tokens == 4) {
    tile_4x4<Block>(n, row_bytes, row_stride, act_bytes, act_stride, out, out_stride);
    return;
  }
  for (int t = 0; t < n_tokens; ++t) {  // edge tiles: the decode kernel, one token at a time
    float column[4];
    gemv<Block>(n, rows, row_stride, n_rows, act_bytes + t * act_stride, column);
    for (int r = 0; r < n_rows; ++r) out[r * out_stride + t] = column[r];
  }
}

}  // namespace

void gemm_tile_q4_0_q8_0_vnni(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                              size_t act_stride, int n_tokens, float* out, size_t out_stride) {
  tile<block_q4_0>(n, rows, row_stride, n_rows, acts, act_stride, n_tokens, out, out_stride);
}

void gemm_tile_q8_0_q8_0_vnni(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                              size_t act_stride, int n_tokens, float* out, size_t out_stride) {
  tile<block_q8_0>(n, rows, row_stride, n_rows, acts, act_stride, n_tokens, out, out_stride);
}

void gemv_q4_0_q8_0_vnni(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out) {
  gemv<block_q4_0>(n, rows, row_stride, n_rows, act, out);
}

void gemv_q8_0_q8_0_vnni(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out) {
  gemv<block_q8_0>(n, rows, row_stride, n_rows, act, out);
}

}  // namespace ember::avx2
