// The integer dot products of int8_dots.h on sdot (ARMv8.2 dot product extension): one
// instruction per 16 byte pairs instead of four (two widening multiplies, two pairwise adds).
// Built with -march=armv8.2-a+dotprod; called only after cpu_has_dotprod().
#include "core/kernels/arm/int8_dots.h"
#include "core/kernels/kernel_impl.h"

namespace ember::neon {
namespace {
struct Sdot {
  static int32x4_t apply(int32x4_t acc, int8x16_t x, int8x16_t y) { return vdotq_s32(acc, x, y); }
};
}  // namespace

float vec_dot_q4_0_q8_0_dotprod(int64_t n, const void* row, const void* act) {
  return dot_q4_0_q8_0<Sdot>(n, row, act);
}
float vec_dot_q8_0_q8_0_dotprod(int64_t n, const void* row, const void* act) {
  return dot_q8_0_q8_0<Sdot>(n, row, act);
}
float vec_dot_q4_K_q8_K_dotprod(int64_t n, const void* row, const void* act) {
  return dot_q4_K_q8_K<Sdot>(n, row, act);
}
float vec_dot_q6_K_q8_K_dotprod(int64_t n, const void* row, const void* act) {
  return dot_q6_K_q8_K<Sdot>(n, row, act);
}

}  // namespace ember::neon
