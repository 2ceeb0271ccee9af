#include "core/sparse/axpy.h"

#include "core/kernels/cpu_features.h"
#include "core/kernels/fp16.h"
#include "core/kernels/type_traits.h"

#if defined(EMBER_HAVE_X86_SIMD)
#include <immintrin.h>
#endif

namespace ember {
namespace {

void axpy_scalar(int64_t n, float a, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void axpy_f16_scalar(int64_t n, float a, const uint16_t* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}

#if defined(EMBER_HAVE_X86_SIMD)
// Compiled for AVX2/F16C through the target attribute (this file is built for the baseline ISA);
// called only when the CPU has them.
__attribute__((target("avx2,f16c"))) void axpy_avx2(int64_t n, float a, const float* x, float* y) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8);
    y0 = _mm256_add_ps(y0, _mm256_mul_ps(va, _mm256_loadu_ps(x + i)));
    y1 = _mm256_add_ps(y1, _mm256_mul_ps(va, _mm256_loadu_ps(x + i + 8)));
    _mm256_storeu_ps(y + i, y0);
    _mm256_storeu_ps(y + i + 8, y1);
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

__attribute__((target("avx2,f16c"))) void axpy_f16_avx2(int64_t n, float a, const uint16_t* x, float* y) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 x1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 8)));
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, x0)));
    _mm256_storeu_ps(y + i + 8, _mm256_add_ps(_mm256_loadu_ps(y + i + 8), _mm256_mul_ps(va, x1)));
  }
  for (; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}
#endif

bool use_avx2() {
#if defined(EMBER_HAVE_X86_SIMD)
  // Follows the kernel set choice, so EMBER_KERNELS=scalar runs the scalar loops here too.
  static const bool yes = active_kernel_set() != KernelSet::Scalar && cpu_has_avx2_fma_f16c();
  return yes;
#else
  return false;
#endif
}

}  // namespace

void axpy(int64_t n, float a, const float* x, float* y) {
#if defined(EMBER_HAVE_X86_SIMD)
  if (use_avx2()) return axpy_avx2(n, a, x, y);
#endif
  axpy_scalar(n, a, x, y);
}

void axpy_f16(int64_t n, float a, const uint16_t* x, float* y) {
#if defined(EMBER_HAVE_X86_SIMD)
  if (use_avx2()) return axpy_f16_avx2(n, a, x, y);
#endif
  axpy_f16_scalar(n, a, x, y);
}

}  // namespace ember
