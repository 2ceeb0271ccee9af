// ARMv8.0 decode rows (gemv_rows.h) for Q4_0 and Q8_0 weights: the widening 16-byte dot of
// vec_dot_neon.cpp, so that each row equals vec_dot_*_q8_0 bit for bit.
#include "core/kernels/arm/gemv_rows.h"
#include "core/kernels/kernel_impl.h"

namespace ember::neon {
namespace {
struct WideningDot {
  static int32x4_t apply(int32x4_t acc, int8x16_t x, int8x16_t y) { return dot_i8x16(acc, x, y); }
};
}  // namespace

void gemv_q4_0_q8_0(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out) {
  gemv_rows<WideningDot, Q4Rows>(n, rows, row_stride, n_rows, act, out);
}

void gemv_q8_0_q8_0(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out) {
  gemv_rows<WideningDot, Q8Rows>(n, rows, row_stride, n_rows, act, out);
}

}  // namespace ember::neon
