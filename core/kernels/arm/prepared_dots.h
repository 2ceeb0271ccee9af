#pragma once
// The prepared-input Q4_0 row dots of the NEON sets (sparse_kernels.h, q4_0_prepared_input.h),
// written once over the block primitive `Pair`: q4_0_prepared_dot_neon.cpp instantiates them with
// widening multiplies, q4_0_prepared_dot_dotprod.cpp with sdot. `Pair::apply(acc, lo, a0, hi, a1)`
// returns acc plus the 32 products lo[i] * a0[i] + hi[i] * a1[i] in 4 int32 lanes, where lo and hi
// are the unsigned nibbles 0..15 of one block (elements 0..15 and 16..31) and a0, a1 the prepared
// input's bytes. The -8 offset is the input's corr (per 4-value group), summed once per block for
// all rows as the accumulator's start value. Static templates, one copy per file and ISA level.
#include "core/kernels/arm/neon_helpers.h"
#include "core/kernels/q4_0_prepared_view.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/row_groups.h"

namespace ember::neon {

// R rows against the same input: the input's loads and start value are shared and the R weight
// streams are independent, so more memory reads are in flight (the sparse FFN's rows are at random
// addresses). One accumulator per row, one fmla per block; every R sums a row in the same order,
// so grouping never changes a result. The rows of `ahead` are requested into L2 at the pace the
// rows stream (one prefetch per row every 3 blocks, 54 bytes), as the x86 kernels do.
template <class Pair, int R>
static void prepared_rows_n(const block_q4_0* const* w, const Q4PreparedView& x, float* out, RowsAhead ahead) {
  const uint8x16_t low4 = vdupq_n_u8(0x0F);
  float32x4_t acc[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0);
  for (int64_t b = 0; b < x.n_blocks; ++b) {
    const int8x16_t a0 = vld1q_s8(x.qs + 32 * b), a1 = vld1q_s8(x.qs + 32 * b + 16);
    const int32x4_t start = vaddq_s32(vld1q_s32(x.corr + 8 * b), vld1q_s32(x.corr + 8 * b + 4));
    const float xd = x.d[b];
    if (b % 3 == 0) {
      for (int r = 0; r < ahead.n; ++r) {
        __builtin_prefetch(static_cast<const char*>(ahead.rows[r]) + b * static_cast<int64_t>(sizeof(block_q4_0)), 0, 2);
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const block_q4_0& blk = w[r][b];
      const uint8x16_t packed = vld1q_u8(blk.qs);
      const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(packed, low4));
      const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(packed, 4));
      const int32x4_t s = Pair::apply(start, lo, a0, hi, a1);
      acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(s), half_to_float(blk.d) * xd);
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) out[r] = vaddvq_f32(acc[r]);
}

template <class Pair>
static float prepared_dot(const void* row, const Q4PreparedView& x) {
  const block_q4_0* w[1] = {static_cast<const block_q4_0*>(row)};
  float out[1];
  prepared_rows_n<Pair, 1>(w, x, out, RowsAhead{});
  return out[0];
}

// The rows ahead are requested during the first group only: with at most 8 rows (the sparse FFN's
// groups) that is the whole of them.
template <class Pair>
static void prepared_dot_rows(const void* const* rows, int n, const Q4PreparedView& x, float* out, RowsAhead ahead) {
  const auto* w = reinterpret_cast<const block_q4_0* const*>(rows);
  for_row_groups(n, [&]<int R>(int r) {
    prepared_rows_n<Pair, R>(w + r, x, out + r, ahead);
    ahead = {};
  });
}

}  // namespace ember::neon
