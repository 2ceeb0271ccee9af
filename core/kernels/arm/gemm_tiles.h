#pragma once
// Prefill register tiles of the NEON sets (GemmTileFn, kernel_impl.h) for the 32-element block
// types against Q8_0 activations, written once over the block primitive `Pair`:
// `Pair::apply(acc, w_lo, a_lo, w_hi, a_hi)` returns acc plus the 32 products of one block (signed
// weight bytes w_lo, w_hi times activation bytes a_lo, a_hi, elements 0..15 and 16..31) in 4 int32
// lanes, spread in any way. gemm_tiles_neon.cpp instantiates them with widening multiplies,
// gemm_tiles_dotprod.cpp with sdot. Every shape from 1x1 to 4x4 is its own instantiation, so the edge tiles of a matmul
// keep the tile's sharing instead of falling back to one vec_dot per pair.
//
// Per block, the tokens' activations are loaded once and every row's quants are unpacked once:
// a row/token pair costs two dots and nothing else. The four pairs of a row are reduced with two
// rounds of pairwise adds to one vector whose lane t is token t, so one fmla per row and block
// scales all tokens (lane t: d_row * d_token t) and the 4 tokens' results of a row are one store.
// Static templates: each file keeps its own copy, built for its ISA level (neon_helpers.h).
#include <array>
#include <utility>

#include "core/kernels/arm/neon_helpers.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"

namespace ember::neon {

// The 32 quants of a weight block as signed bytes (elements 0..15, 16..31).
static inline void signed_quants(const block_q4_0& b, int8x16_t& lo, int8x16_t& hi) { q4_0_unpack(b.qs, lo, hi); }
static inline void signed_quants(const block_q8_0& b, int8x16_t& lo, int8x16_t& hi) {
  lo = vld1q_s8(b.qs);
  hi = vld1q_s8(b.qs + 16);
}

template <class Pair, class Block, int R, int T>
static void tile_rt(int64_t n, const uint8_t* row_bytes, size_t row_stride, const uint8_t* act_bytes,
                    size_t act_stride, float* out, size_t out_stride) {
  const Block* w[R];
  const block_q8_0* x[T];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(row_bytes + r * row_stride);
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const block_q8_0*>(act_bytes + t * act_stride);
  float32x4_t acc[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0);
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int8x16_t a_lo[T], a_hi[T];
    uint16_t halves[4] = {0, 0, 0, 0};  // lanes past T scale a zero sum
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      a_lo[t] = vld1q_s8(x[t][b].qs);
      a_hi[t] = vld1q_s8(x[t][b].qs + 16);
      halves[t] = x[t][b].d;
    }
    const float32x4_t act_d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(halves)));
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      int8x16_t lo, hi;
      signed_quants(w[r][b], lo, hi);
      int32x4_t s[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) s[t] = Pair::apply(s[t], lo, a_lo[t], hi, a_hi[t]);
      // Lane t: token t's whole block sum (exact in int32).
      const int32x4_t sums = vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
      acc[r] = vfmaq_f32(acc[r], vcvtq_f32_s32(sums), vmulq_n_f32(act_d, half_to_float(w[r][b].d)));
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if constexpr (T == 4) {
      vst1q_f32(out + r * out_stride, acc[r]);
    } else {
      float lanes[4];
      vst1q_f32(lanes, acc[r]);
      for (int t = 0; t < T; ++t) out[r * out_stride + t] = lanes[t];
    }
  }
}

using TileBody = void (*)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, size_t);

template <class Pair, class Block, int R, int... T>
static constexpr std::array<TileBody, 4> tile_row_of_table(std::integer_sequence<int, T...>) {
  return {&tile_rt<Pair, Block, R, T + 1>...};
}

// kTiles[R - 1][T - 1] is the R x T tile.
template <class Pair, class Block>
static constexpr std::array<std::array<TileBody, 4>, 4> kTiles = {
    tile_row_of_table<Pair, Block, 1>(std::make_integer_sequence<int, 4>{}),
    tile_row_of_table<Pair, Block, 2>(std::make_integer_sequence<int, 4>{}),
    tile_row_of_table<Pair, Block, 3>(std::make_integer_sequence<int, 4>{}),
    tile_row_of_table<Pair, Block, 4>(std::make_integer_sequence<int, 4>{}),
};

template <class Pair, class Block>
static void gemm_tile(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts, size_t act_stride,
                      int n_tokens, float* out, size_t out_stride) {
  if (n_rows < 1 || n_rows > 4 || n_tokens < 1 || n_tokens > 4) return;
  kTiles<Pair, Block>[n_rows - 1][n_tokens - 1](n, static_cast<const uint8_t*>(rows), row_stride,
                                               static_cast<const uint8_t*>(acts), act_stride, out, out_stride);
}

}  // namespace ember::neon
