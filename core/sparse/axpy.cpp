#include "core/sparse/axpy.h"

#include "core/kernels/cpu_features.h"
#include "core/kernels/fp16.h"
#include "core/kernels/quant_blocks.h"
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

void axpy_q4_0_scalar(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q4_0*>(x);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK4_0) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const float lo = static_cast<float>((b[i].qs[j] & 0x0F) - 8) * d;
      const float hi = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
      y[j] += a * lo;
      y[j + kQK4_0 / 2] += a * hi;
    }
  }
}

void axpy_q8_0_scalar(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q8_0*>(x);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK8_0) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[j] += a * (static_cast<float>(b[i].qs[j]) * d);
  }
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

// 8 int32 lanes -> y[0..8) += a * (float(q) * d)
__attribute__((target("avx2,f16c"))) inline void axpy8_i32(__m256i q, __m256 d, __m256 a, float* y) {
  const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
  _mm256_storeu_ps(y, _mm256_add_ps(_mm256_loadu_ps(y), _mm256_mul_ps(a, v)));
}

__attribute__((target("avx2,f16c"))) void axpy_q4_0_avx2(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q4_0*>(x);
  const __m256 va = _mm256_set1_ps(a);
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m256i eight = _mm256_set1_epi32(8);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK4_0) {
    const __m256 d = _mm256_set1_ps(fp16_to_fp32(b[i].d));
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs));
    const __m128i lo = _mm_and_si128(raw, mask);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
    axpy8_i32(_mm256_sub_epi32(_mm256_cvtepu8_epi32(lo), eight), d, va, y);
    axpy8_i32(_mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)), eight), d, va, y + 8);
    axpy8_i32(_mm256_sub_epi32(_mm256_cvtepu8_epi32(hi), eight), d, va, y + 16);
    axpy8_i32(_mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)), eight), d, va, y + 24);
  }
}

__attribute__((target("avx2,f16c"))) void axpy_q8_0_avx2(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q8_0*>(x);
  const __m256 va = _mm256_set1_ps(a);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK8_0) {
    const __m256 d = _mm256_set1_ps(fp16_to_fp32(b[i].d));
    for (int j = 0; j < kQK8_0; j += 8) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + j));
      axpy8_i32(_mm256_cvtepi8_epi32(q), d, va, y + j);
    }
  }
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

void axpy_q4_0(int64_t n_blocks, float a, const void* x, float* y) {
#if defined(EMBER_HAVE_X86_SIMD)
  if (use_avx2()) return axpy_q4_0_avx2(n_blocks, a, x, y);
#endif
  axpy_q4_0_scalar(n_blocks, a, x, y);
}

void axpy_q8_0(int64_t n_blocks, float a, const void* x, float* y) {
#if defined(EMBER_HAVE_X86_SIMD)
  if (use_avx2()) return axpy_q8_0_avx2(n_blocks, a, x, y);
#endif
  axpy_q8_0_scalar(n_blocks, a, x, y);
}

}  // namespace ember
