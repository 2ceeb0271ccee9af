// Prepared-input Q4_0 dots (prepared_dots.h) on sdot: two instructions per block and row. Built
// with -march=armv8.2-a+dotprod; called only after cpu_has_dotprod().
#include "core/kernels/arm/prepared_dots.h"
#include "core/kernels/kernel_impl.h"

namespace ember::neon {
namespace {
struct SdotPair {
  static int32x4_t apply(int32x4_t acc, int8x16_t lo, int8x16_t a0, int8x16_t hi, int8x16_t a1) {
    return vdotq_s32(vdotq_s32(acc, lo, a0), hi, a1);
  }
};
}  // namespace

float dot_q4_0_prepared_dotprod(const void* row, const Q4PreparedView& x) { return prepared_dot<SdotPair>(row, x); }

void dot_q4_0_prepared_rows_dotprod(const void* const* rows, int n, const Q4PreparedView& x, float* out,
                                    RowsAhead ahead) {
  prepared_dot_rows<SdotPair>(rows, n, x, out, ahead);
}

}  // namespace ember::neon
