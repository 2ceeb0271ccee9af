// Decode rows (gemv_rows.h) on sdot, each row equal to vec_dot_*_q8_0_dotprod bit for bit. Built
// with -march=armv8.2-a+dotprod; called only after cpu_has_dotprod().
#include "core/kernels/arm/gemv_rows.h"
#include "core/kernels/kernel_impl.h"

namespace ember::neon {
namespace {
struct Sdot {
  static int32x4_t apply(int32x4_t acc, int8x16_t x, int8x16_t y) { return vdotq_s32(acc, x, y); }
};
}  // namespace

void gemv_q4_0_q8_0_dotprod(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out) {
  gemv_rows<Sdot, Q4Rows>(n, rows, row_stride, n_rows, act, out);
}

void gemv_q8_0_q8_0_dotprod(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out) {
  gemv_rows<Sdot, Q8Rows>(n, rows, row_stride, n_rows, act, out);
}

}  // namespace ember::neon
