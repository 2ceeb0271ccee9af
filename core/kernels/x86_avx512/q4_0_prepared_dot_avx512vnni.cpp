// AVX-512 VNNI prepared-input Q4_0 dot (sparse_kernels.h), two blocks per step: half the
// instructions of a one-block VNNI dot per value. The 32 bytes of packed weights of blocks b and
// b+1 become one 64-byte register [b lo, b+1 lo, b hi, b+1 hi] (the order of the input's pair
// layout, q4_0_prepared_input.h), one vpdpbusd does all 64 products, and the two weight scales are
// spread over their lanes by a masked broadcast.
// Built with -mavx512*: only intrinsics, plain structs and local helpers here (see
// panel16_avx512vnni.cpp for why).
// GCC 12 warns that the undefined vectors inside its own AVX-512 intrinsics "may be" or "are used
// uninitialized" (_mm512_extractf64x4_pd): a false positive in its headers. Clang has no such warning (nor this pragma's
// option name), hence the guard.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "core/kernels/kernel_impl.h"
#include "core/kernels/q4_0_prepared_view.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/row_groups.h"

namespace ember::avx512 {
namespace {

// One block through 256-bit VNNI (the odd last block): its 32 weights as bytes 0..15 (low nibbles
// = elements 0..15 in the low lane, high nibbles = 16..31 in the high lane, the input's element
// order), one vpdpbusd for the four products per lane started at corr, then scaled by d_w * d_x.
inline __m256 block_vnni(const block_q4_0& w, const int8_t* xq, const int32_t* corr, float xd) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs));
  const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0F));
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
  const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_dpbusd_epi32(c, q, a)), _mm256_set1_ps(_cvtsh_ss(w.d) * xd));
}

inline __m512 pair_vnni512(const block_q4_0& w0, const block_q4_0& w1, const int8_t* xq, const int32_t* corr,
                           const float* xd) {
  const __m256i raw = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w0.qs))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(w1.qs)), 1);
  // raw in both halves, the upper one shifted right by 4 (the high nibbles), then masked.
  const __m512i both = _mm512_broadcast_i64x4(raw);
  const __m512i q = _mm512_and_si512(_mm512_mask_srli_epi16(both, 0xFFFF0000u, both, 4), _mm512_set1_epi8(0x0F));
  const __m512i sum = _mm512_dpbusd_epi32(_mm512_loadu_si512(corr), q, _mm512_loadu_si512(xq));
  // Lanes 0-3 and 8-11 belong to block b, 4-7 and 12-15 to block b+1.
  const __m256i dh = _mm256_mask_set1_epi16(_mm256_set1_epi16(static_cast<short>(w0.d)), 0xF0F0,
                                            static_cast<short>(w1.d));
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_cvtph_ps(dh)), _mm512_loadu_ps(xd));
}

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// R rows against the same input at once: the input's loads are shared and the R weight streams
// are independent, so more memory reads are in flight (the sparse FFN's rows are at random
// addresses, and one stream at a time leaves the core waiting). Each row is summed exactly as the
// one-row kernel sums it (same accumulators, same order), so grouping rows never changes a result.
// 8 rows keep 16 accumulators and the shared input in the 32 vector registers.
template <int R>
inline void dot_rows_n(const block_q4_0* const* w, const Q4PreparedView& x, float* out) {
  const int8_t* xq = x.qs_pairs;
  const int32_t* corr = x.corr_pairs;
  const float* xd = x.d_pairs;
  const int64_t n_pairs = x.n_blocks / 2;
  __m512 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 2 <= n_pairs; p += 2) {
    for (int r = 0; r < R; ++r) {
      acc0[r] = _mm512_add_ps(acc0[r], pair_vnni512(w[r][2 * p], w[r][2 * p + 1], xq + 64 * p, corr + 16 * p, xd + 16 * p));
      acc1[r] = _mm512_add_ps(acc1[r], pair_vnni512(w[r][2 * p + 2], w[r][2 * p + 3], xq + 64 * (p + 1),
                                                    corr + 16 * (p + 1), xd + 16 * (p + 1)));
    }
  }
  for (int r = 0; r < R; ++r) {
    if (p < n_pairs) {
      acc0[r] = _mm512_add_ps(acc0[r], pair_vnni512(w[r][2 * p], w[r][2 * p + 1], xq + 64 * p, corr + 16 * p, xd + 16 * p));
    }
    // Halves by hand rather than _mm512_reduce_add_ps, whose GCC 12 expansion warns of
    // uninitialized lanes.
    const __m512 v512 = _mm512_add_ps(acc0[r], acc1[r]);
    float sum = hsum256(_mm256_add_ps(_mm512_castps512_ps256(v512),
                                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v512), 1))));
    if (x.n_blocks % 2 != 0) {  // the odd last block, in element order
      const int64_t b = x.n_blocks - 1;
      sum += hsum256(block_vnni(w[r][b], x.qs + 32 * b, x.corr + 8 * b, x.d[b]));
    }
    out[r] = sum;
  }
}

}  // namespace

float dot_q4_0_prepared(const void* row, const Q4PreparedView& x) {
  const block_q4_0* w[1] = {static_cast<const block_q4_0*>(row)};
  float out[1];
  dot_rows_n<1>(w, x, out);
  return out[0];
}

// Does not request the rows ahead: not measured on an AVX-512 host yet (docs/limitations.md).
void dot_q4_0_prepared_rows(const void* const* rows, int n, const Q4PreparedView& x, float* out, RowsAhead) {
  const auto* w = reinterpret_cast<const block_q4_0* const*>(rows);
  for_row_groups(n, [&]<int R>(int r) { dot_rows_n<R>(w + r, x, out + r); });
}

}  // namespace ember::avx512
