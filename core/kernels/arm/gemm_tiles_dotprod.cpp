// Prefill tiles (gemm_tiles.h) on sdot: two instructions per block and row/token pair. Built with
// -march=armv8.2-a+dotprod; called only after cpu_has_dotprod().
#include "core/kernels/arm/gemm_tiles.h"

namespace ember::neon {
namespace {
struct SdotPair {
  static int32x4_t apply(int32x4_t acc, int8x16_t w_lo, int8x16_t a_lo, int8x16_t w_hi, int8x16_t a_hi) {
    return vdotq_s32(vdotq_s32(acc, w_lo, a_lo), w_hi, a_hi);
  }
};
}  // namespace

void gemm_tile_q4_0_q8_0_dotprod(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                                 size_t act_stride, int n_tokens, float* out, size_t out_stride) {
  gemm_tile<SdotPair, block_q4_0>(n, rows, row_stride, n_rows, acts, act_stride, n_tokens, out, out_stride);
}

void gemm_tile_q8_0_q8_0_dotprod(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                                 size_t act_stride, int n_tokens, float* out, size_t out_stride) {
  gemm_tile<SdotPair, block_q8_0>(n, rows, row_stride, n_rows, acts, act_stride, n_tokens, out, out_stride);
}

}  // namespace ember::neon
