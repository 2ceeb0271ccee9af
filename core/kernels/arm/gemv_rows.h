#pragma once
// Decode rows of the NEON sets (GemvRowsFn, kernel_impl.h): several Q4_0/Q8_0 weight rows against
// one Q8_0 activation row, written once over the 16-byte dot `Dot` of int8_dots.h:
// gemv_rows_neon.cpp instantiates them with widening multiplies, gemv_rows_dotprod.cpp with sdot.
//
// Groups of 4, 2 and 1 rows go through the blocks together, so each activation block is loaded,
// and its scale converted, once per group instead of once per row; the R weight streams are
// independent chains. Not 8 (the sparse kernels' group): with vec_dot's two accumulators per row,
// 8 rows' accumulators, pointers and temporaries spill to the stack (GCC 12), and 4 rows' scales
// fill one vector. For Q4_0 the -8 offset of the quants becomes the start value of
// the dot, Dot(-8, a), computed once per block for all rows: a row then dots its raw nibbles, with
// no subtraction.
//
// Every row's result is bit for bit the set's vec_dot (int8_dots.h): the offset lands in the same
// int32 lane as the products it replaces (a Dot's lane depends only on the byte position), so
// every lane total is the same exact integer, and each row keeps vec_dot's two float accumulators
// (even blocks, odd blocks), its scale product d_w * d_x and its final sum.
// Static templates: each file keeps its own copy, built for its ISA level (neon_helpers.h).
#include "core/kernels/arm/neon_helpers.h"
#include "core/kernels/quant_blocks.h"

namespace ember::neon {

struct Q4Rows {
  using Block = block_q4_0;
  // The start value of every row's block dot: -8 * a, in the Dot's lanes.
  template <class Dot>
  static int32x4_t start(int8x16_t a0, int8x16_t a1) {
    const int8x16_t minus8 = vdupq_n_s8(-8);
    return Dot::apply(Dot::apply(vdupq_n_s32(0), minus8, a0), minus8, a1);
  }
  template <class Dot>
  static int32x4_t block(int32x4_t start, const Block& w, int8x16_t a0, int8x16_t a1) {
    const uint8x16_t packed = vld1q_u8(w.qs);
    const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0F)));
    const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(packed, 4));
    return Dot::apply(Dot::apply(start, lo, a0), hi, a1);
  }
};

struct Q8Rows {
  using Block = block_q8_0;
  template <class Dot>
  static int32x4_t start(int8x16_t, int8x16_t) { return vdupq_n_s32(0); }
  template <class Dot>
  static int32x4_t block(int32x4_t start, const Block& w, int8x16_t a0, int8x16_t a1) {
    return Dot::apply(Dot::apply(start, vld1q_s8(w.qs), a0), vld1q_s8(w.qs + 16), a1);
  }
};

// One block of R rows into the accumulators acc (vec_dot's even or odd chain). The R rows' scales
// are gathered into one vector, converted and multiplied by the activation's scale together: the
// same float products d_w * d_x as vec_dot's, one instruction each for up to 4 rows.
template <class Dot, class Kind, int R>
static inline void rows_block(const typename Kind::Block* const* w, const block_q8_0& x, int64_t b,
                              float32x4_t* acc) {
  const int8x16_t a0 = vld1q_s8(x.qs), a1 = vld1q_s8(x.qs + 16);
  const int32x4_t start = Kind::template start<Dot>(a0, a1);
  uint16x4_t halves = vdup_n_u16(0);
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) halves = vld1_lane_u16(&w[r][b].d, halves, r);
  const float32x4_t scales = vmulq_n_f32(vcvt_f32_f16(vreinterpret_f16_u16(halves)), half_to_float(x.d));
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const int32x4_t s = Kind::template block<Dot>(start, w[r][b], a0, a1);
    acc[r] = vfmaq_laneq_f32(acc[r], vcvtq_f32_s32(s), scales, r);
  }
}

template <class Dot, class Kind, int R>
static void rows_n(int64_t nb, const uint8_t* row_bytes, size_t row_stride, const block_q8_0* x, float* out) {
  static_assert(R <= 4, "one scale vector per group");
  using Block = typename Kind::Block;
  const Block* w[R];
  float32x4_t even[R], odd[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    w[r] = reinterpret_cast<const Block*>(row_bytes + r * row_stride);
    even[r] = vdupq_n_f32(0);
    odd[r] = vdupq_n_f32(0);
  }
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    rows_block<Dot, Kind, R>(w, x[b], b, even);
    rows_block<Dot, Kind, R>(w, x[b + 1], b + 1, odd);
  }
  if (b < nb) rows_block<Dot, Kind, R>(w, x[b], b, even);
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) out[r] = vaddvq_f32(vaddq_f32(even[r], odd[r]));
}

template <class Dot, class Kind>
static void gemv_rows(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out) {
  const auto* row_bytes = static_cast<const uint8_t*>(rows);
  const auto* x = static_cast<const block_q8_0*>(act);
  const int64_t nb = n / kQK8_0;
  int r = 0;
  for (; r + 4 <= n_rows; r += 4) rows_n<Dot, Kind, 4>(nb, row_bytes + r * row_stride, row_stride, x, out + r);
  if (r + 2 <= n_rows) {
    rows_n<Dot, Kind, 2>(nb, row_bytes + r * row_stride, row_stride, x, out + r);
    r += 2;
  }
  if (r < n_rows) rows_n<Dot, Kind, 1>(nb, row_bytes + r * row_stride, row_stride, x, out + r);
}

}  // namespace ember::neon
