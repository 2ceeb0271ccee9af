// AVX2 prepared-input Q4_0 dot (sparse_kernels.h): maddubs on the unsigned nibbles against the
// prepared Q8_0 input, the -8 offset in the accumulator's start value (q4_0_prepared_input.h).
#include <immintrin.h>

#include "core/kernels/fp16.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/q4_0_prepared_view.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/row_groups.h"
#include "core/kernels/x86/avx2_helpers.h"

namespace ember::avx2 {
namespace {

// R rows against the same input at once: the input's loads are shared and the R weight streams
// are independent, so more memory reads are in flight (the sparse FFN's rows are at random
// addresses). One accumulator per row, one fma per block: with R >= 4 the R chains hide the fma
// latency, and every R sums a row in the same order, so grouping rows never changes a result.
// 8 rows keep 8 accumulators and the shared input in the 16 vector registers.
// The scale d_w * d_x of a block: d_w broadcast from the fp16 table, times d_x broadcast: the same
// product as the scalar kernel's, in 3 instructions instead of 6.
// While the rows stream, the rows of `ahead` (the next rows the caller will need, the same length)
// are requested into L2 at the same pace: every 3 blocks (54 bytes, less than a line) one prefetch
// per row at the same offset. The sparse FFN's rows start at random addresses, and a row that is
// not requested until its group starts waits for DRAM; requesting the next group's rows all at
// once instead (up to 18 KB) floods the miss queue and was slower (Zen 2, kernel bench: gate dots
// 13.6 -> 12.0 ms per token paced, 13.4 -> 18.7 all at once).
template <int R>
inline void dot_rows_n(const block_q4_0* const* w, const Q4PreparedView& x, float* out, RowsAhead ahead) {
  const int8_t* xq = x.qs;
  const float* xd = x.d;
  const int32_t* corr = x.corr;
  const int64_t nb = x.n_blocks;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i high_lane_shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
  __m256 acc[R];
  const float* f16 = fp16_to_fp32_table();
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * b));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr + 8 * b));
    const __m256 d = _mm256_broadcast_ss(xd + b);
    if (b % 3 == 0) {
      for (int r = 0; r < ahead.n; ++r) {
        _mm_prefetch(static_cast<const char*>(ahead.rows[r]) + b * static_cast<int64_t>(sizeof(block_q4_0)),
                     _MM_HINT_T1);
      }
    }
    for (int r = 0; r < R; ++r) {
      const block_q4_0& blk = w[r][b];
      // The block's 16 bytes in both lanes, the high lane shifted by 4: low nibbles (elements
      // 0..15) below, high nibbles (16..31) above. One instruction fewer than srli + insert.
      const __m256i packed =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs)));
      const __m256i q = _mm256_and_si256(_mm256_srlv_epi32(packed, high_lane_shift), low4);
      // maddubs: u8 x s8 -> pairs of int16 (2 * 15 * 128 cannot overflow), madd with ones -> int32.
      const __m256i sum = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), ones));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(_mm256_broadcast_ss(f16 + blk.d), d), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

}  // namespace

float dot_q4_0_prepared(const void* row, const Q4PreparedView& x) {
  const block_q4_0* w[1] = {static_cast<const block_q4_0*>(row)};
  float out[1];
  dot_rows_n<1>(w, x, out, RowsAhead{});
  return out[0];
}

// The rows ahead are requested during the first group only: with at most 8 rows (the sparse FFN's
// groups) that is the whole of them.
void dot_q4_0_prepared_rows(const void* const* rows, int n, const Q4PreparedView& x, float* out, RowsAhead ahead) {
  const auto* w = reinterpret_cast<const block_q4_0* const*>(rows);
  for_row_groups(n, [&]<int R>(int r) {
    dot_rows_n<R>(w + r, x, out + r, ahead);
    ahead = {};
  });
}

}  // namespace ember::avx2
