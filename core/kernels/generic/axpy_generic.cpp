// Scalar reference of the sparse FFN's down accumulation (sparse_kernels.h): the arithmetic every
// other set must reproduce bit for bit.
#include <cmath>

#include "core/kernels/fp16.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"

namespace ember::generic {
namespace {

// a * x rounded to float on its own. GCC contracts y + a * x into one fma (one rounding) by
// default wherever the target has a scalar fma: aarch64's base ISA, x86 built with -mfma or
// -march=native. The empty asm makes the product an opaque value in a float register.
inline float rounded_product(float a, float x) {
  float p = a * x;
#if defined(__aarch64__)
  __asm__("" : "+w"(p));
#elif defined(__x86_64__)
  __asm__("" : "+x"(p));
#else
  volatile float opaque = p;
  p = opaque;
#endif
  return p;
}

}  // namespace

void axpy_f32(int64_t n, float a, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += rounded_product(a, x[i]);
}

void axpy_f16(int64_t n, float a, const uint16_t* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += rounded_product(a, fp16_to_fp32(x[i]));
}

// One rounding per value: y + (q - 8) * (a * d) fused. (q - 8) is exact in float; a * d is rounded
// once per block, the same float in every implementation.
void axpy_q4_0(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q4_0*>(x);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK4_0) {
    const float ad = a * fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = std::fma(static_cast<float>((b[i].qs[j] & 0x0F) - 8), ad, y[j]);
      y[j + kQK4_0 / 2] = std::fma(static_cast<float>((b[i].qs[j] >> 4) - 8), ad, y[j + kQK4_0 / 2]);
    }
  }
}

void axpy_q8_0(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q8_0*>(x);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK8_0) {
    const float ad = a * fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[j] = std::fma(static_cast<float>(b[i].qs[j]), ad, y[j]);
  }
}

void axpy_q4_0_rows(int64_t n_blocks, const float* a, const void* const* x, int n, float* y) {
  for (int r = 0; r < n; ++r) axpy_q4_0(n_blocks, a[r], x[r], y);
}

}  // namespace ember::generic
