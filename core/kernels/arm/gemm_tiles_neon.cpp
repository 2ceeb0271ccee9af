// ARMv8.0 prefill tiles (gemm_tiles.h) for Q4_0 and Q8_0 weights against Q8_0 activations.
#include "core/kernels/arm/gemm_tiles.h"

namespace ember::neon {
namespace {
// Q4_0 quants are -8..7, so |w * a| <= 8 * 127 and two products fit int16: one widening multiply
// and one widening multiply-accumulate per 8 elements of each half, then two pairwise widening
// adds (6 instructions per block and pair instead of 8).
struct Q4Pair {
  static int32x4_t apply(int32x4_t acc, int8x16_t w_lo, int8x16_t a_lo, int8x16_t w_hi, int8x16_t a_hi) {
    const int16x8_t p0 = vmlal_s8(vmull_s8(vget_low_s8(w_lo), vget_low_s8(a_lo)), vget_low_s8(w_hi), vget_low_s8(a_hi));
    const int16x8_t p1 = vmlal_high_s8(vmull_high_s8(w_lo, a_lo), w_hi, a_hi);
    return vpadalq_s16(vpadalq_s16(acc, p0), p1);
  }
};
// Q8_0 weights may hold -128 (a file is not bound to ggml's quantizer): -128 * -128 * 2 would not
// fit int16, so each product goes to int32 separately (dot_i8x16).
struct Q8Pair {
  static int32x4_t apply(int32x4_t acc, int8x16_t w_lo, int8x16_t a_lo, int8x16_t w_hi, int8x16_t a_hi) {
    return dot_i8x16(dot_i8x16(acc, w_lo, a_lo), w_hi, a_hi);
  }
};
}  // namespace

void gemm_tile_q4_0_q8_0(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                         size_t act_stride, int n_tokens, float* out, size_t out_stride) {
  gemm_tile<Q4Pair, block_q4_0>(n, rows, row_stride, n_rows, acts, act_stride, n_tokens, out, out_stride);
}

void gemm_tile_q8_0_q8_0(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                         size_t act_stride, int n_tokens, float* out, size_t out_stride) {
  gemm_tile<Q8Pair, block_q8_0>(n, rows, row_stride, n_rows, acts, act_stride, n_tokens, out, out_stride);
}

}  // namespace ember::neon
