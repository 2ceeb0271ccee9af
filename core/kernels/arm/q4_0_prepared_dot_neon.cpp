// ARMv8.0 prepared-input Q4_0 dots (prepared_dots.h). The nibbles are 0..15, so a product with an
// input byte is at most 15 * 128 and two of them fit int16: one widening multiply and one widening
// multiply-accumulate per 8 pairs of each half, then two pairwise adds into int32 (6 instructions
// per block instead of 8 for two separate 16-byte dots).
#include "core/kernels/arm/prepared_dots.h"
#include "core/kernels/kernel_impl.h"

namespace ember::neon {
namespace {
struct WideningPair {
  static int32x4_t apply(int32x4_t acc, int8x16_t lo, int8x16_t a0, int8x16_t hi, int8x16_t a1) {
    const int16x8_t p0 = vmlal_s8(vmull_s8(vget_low_s8(lo), vget_low_s8(a0)), vget_low_s8(hi), vget_low_s8(a1));
    const int16x8_t p1 = vmlal_high_s8(vmull_high_s8(lo, a0), hi, a1);
    return vpadalq_s16(vpadalq_s16(acc, p0), p1);
  }
};
}  // namespace

float dot_q4_0_prepared(const void* row, const Q4PreparedView& x) { return prepared_dot<WideningPair>(row, x); }

void dot_q4_0_prepared_rows(const void* const* rows, int n, const Q4PreparedView& x, float* out, RowsAhead ahead) {
  prepared_dot_rows<WideningPair>(rows, n, x, out, ahead);
}

}  // namespace ember::neon
