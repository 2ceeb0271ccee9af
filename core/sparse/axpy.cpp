#include "core/sparse/axpy.h"

#include <bit>
#include <cmath>

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

// One rounding per value: y + (q - 8) * (a * d) fused. (q - 8) is exact in float; a * d is rounded
// once per block, the same float in every implementation.
void axpy_q4_0_scalar(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q4_0*>(x);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK4_0) {
    const float ad = a * fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = std::fma(static_cast<float>((b[i].qs[j] & 0x0F) - 8), ad, y[j]);
      y[j + kQK4_0 / 2] = std::fma(static_cast<float>((b[i].qs[j] >> 4) - 8), ad, y[j + kQK4_0 / 2]);
    }
  }
}

void axpy_q8_0_scalar(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q8_0*>(x);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK8_0) {
    const float ad = a * fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[j] = std::fma(static_cast<float>(b[i].qs[j]), ad, y[j]);
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

// 8 int32 lanes -> y[0..8) = fma(float(q), ad, y)
__attribute__((target("avx2,fma,f16c"))) inline void fma8_i32(__m256i q, __m256 ad, float* y) {
  _mm256_storeu_ps(y, _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), ad, _mm256_loadu_ps(y)));
}

__attribute__((target("avx2,fma,f16c"))) void axpy_q4_0_avx2(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q4_0*>(x);
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m256i eight = _mm256_set1_epi32(8);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK4_0) {
    const __m256 ad = _mm256_set1_ps(a * _cvtsh_ss(b[i].d));
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs));
    const __m128i lo = _mm_and_si128(raw, mask);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
    fma8_i32(_mm256_sub_epi32(_mm256_cvtepu8_epi32(lo), eight), ad, y);
    fma8_i32(_mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)), eight), ad, y + 8);
    fma8_i32(_mm256_sub_epi32(_mm256_cvtepu8_epi32(hi), eight), ad, y + 16);
    fma8_i32(_mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)), eight), ad, y + 24);
  }
}

// Bytes 2 and 3 of the float q - 8 for q = 0..15, as pshufb tables: every integer in [-8, 7]
// needs at most 3 significant bits, so its float has only zeros in the low 16 bits (it is a
// bf16). Two table lookups and two interleaves give the floats themselves, exactly.
constexpr uint8_t q4_float_byte(int q, int byte) {
  return static_cast<uint8_t>(std::bit_cast<uint32_t>(static_cast<float>(q - 8)) >> (8 * byte));
}
static_assert([] {
  for (int q = 0; q < 16; ++q) {
    if ((std::bit_cast<uint32_t>(static_cast<float>(q - 8)) & 0xFFFFu) != 0) return false;
  }
  return true;
}());
#define EMBER_Q4_FLOAT_BYTES(B)                                                                            \
  q4_float_byte(0, B), q4_float_byte(1, B), q4_float_byte(2, B), q4_float_byte(3, B), q4_float_byte(4, B),  \
      q4_float_byte(5, B), q4_float_byte(6, B), q4_float_byte(7, B), q4_float_byte(8, B),                   \
      q4_float_byte(9, B), q4_float_byte(10, B), q4_float_byte(11, B), q4_float_byte(12, B),                \
      q4_float_byte(13, B), q4_float_byte(14, B), q4_float_byte(15, B)

// Several rows into the same y, block by block (AVX2): y's 32 floats are loaded and stored once per
// block for all rows and the rows stream in side by side. Per value the same fmas in the same
// (row) order as one axpy_q4_0_avx2 call per row, so the same floats.
// A block's 16 bytes are loaded into both 128-bit lanes; a per-lane shift leaves the low nibbles
// (elements 0..15) in the low lane and the high nibbles (16..31) in the high one. The floats
// q - 8 come from two pshufb table lookups (bytes 2 and 3 of each float) interleaved with zeros,
// in the order the in-lane unpacks give: [0..3 | 16..19], [4..7 | 20..23], [8..11 | 24..27],
// [12..15 | 28..31]; y is loaded and stored in that order. 19 instructions per row and block
// instead of 23 with sign extension and int -> float conversion: 3.1 -> 2.6 ns per row and block
// in cache on a Zen 2 host (8 rows). Tried and slower there: an fp16 table through vcvtph2ps
// (2.9 ns), splitting the words by and/shift instead of the second interleave (2.75), nibbles
// sign-extended by variable shifts with no shuffles (3.9); two blocks per step changed nothing.
// a * d per block and row: a and d (from the fp16 table) broadcast straight from memory and
// multiplied: the same product as a * _cvtsh_ss(d), in 3 instructions instead of 5.
template <int R>
__attribute__((target("avx2,fma,f16c"))) inline void axpy_q4_0_rows_avx2(int64_t n_blocks, const float* a,
                                                                        const void* const* x, float* y) {
  const block_q4_0* b[R];
  for (int r = 0; r < R; ++r) b[r] = static_cast<const block_q4_0*>(x[r]);
  const __m256i byte2 = _mm256_setr_epi8(EMBER_Q4_FLOAT_BYTES(2), EMBER_Q4_FLOAT_BYTES(2));
  const __m256i byte3 = _mm256_setr_epi8(EMBER_Q4_FLOAT_BYTES(3), EMBER_Q4_FLOAT_BYTES(3));
  const __m256i high_lane_shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i zero = _mm256_setzero_si256();
  const float* f16 = fp16_to_fp32_table();
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK4_0) {
    __m256 y0 = _mm256_loadu2_m128(y + 16, y), y1 = _mm256_loadu2_m128(y + 20, y + 4),
           y2 = _mm256_loadu2_m128(y + 24, y + 8), y3 = _mm256_loadu2_m128(y + 28, y + 12);
    for (int r = 0; r < R; ++r) {
      const __m256 ad = _mm256_mul_ps(_mm256_broadcast_ss(a + r), _mm256_broadcast_ss(f16 + b[r][i].d));
      const __m256i raw =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[r][i].qs)));
      const __m256i q = _mm256_and_si256(_mm256_srlv_epi32(raw, high_lane_shift), low4);
      const __m256i lo = _mm256_shuffle_epi8(byte2, q), hi = _mm256_shuffle_epi8(byte3, q);
      const __m256i w0 = _mm256_unpacklo_epi8(lo, hi), w1 = _mm256_unpackhi_epi8(lo, hi);
      y0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, w0)), ad, y0);
      y1 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, w0)), ad, y1);
      y2 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, w1)), ad, y2);
      y3 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, w1)), ad, y3);
    }
    _mm256_storeu2_m128(y + 16, y, y0);
    _mm256_storeu2_m128(y + 20, y + 4, y1);
    _mm256_storeu2_m128(y + 24, y + 8, y2);
    _mm256_storeu2_m128(y + 28, y + 12, y3);
  }
}
#undef EMBER_Q4_FLOAT_BYTES

__attribute__((target("avx2,fma,f16c"))) void axpy_q4_0_rows_avx2_any(int64_t n_blocks, const float* a,
                                                                     const void* const* x, int n, float* y) {
  int r = 0;
  for (; r + 8 <= n; r += 8) axpy_q4_0_rows_avx2<8>(n_blocks, a + r, x + r, y);
  if (r + 4 <= n) { axpy_q4_0_rows_avx2<4>(n_blocks, a + r, x + r, y); r += 4; }
  if (r + 2 <= n) { axpy_q4_0_rows_avx2<2>(n_blocks, a + r, x + r, y); r += 2; }
  if (r < n) axpy_q4_0_rows_avx2<1>(n_blocks, a + r, x + r, y);
}

__attribute__((target("avx2,fma,f16c"))) void axpy_q8_0_avx2(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q8_0*>(x);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK8_0) {
    const __m256 ad = _mm256_set1_ps(a * _cvtsh_ss(b[i].d));
    for (int j = 0; j < kQK8_0; j += 8) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + j));
      fma8_i32(_mm256_cvtepi8_epi32(q), ad, y + j);
    }
  }
}

// AVX-512: a block is two 16-float halves; vpermps looks (q - 8) up in a 16-entry float table
// straight from the zero-extended nibbles (no int -> float conversion).
#define EMBER_AVX512 "avx2,fma,f16c,avx512f,avx512bw,avx512vl"
// GCC 12 warns falsely about the undefined vectors inside its own AVX-512 intrinsics when they are
// used through a target attribute.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target(EMBER_AVX512))) void axpy_q4_0_avx512(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q4_0*>(x);
  const __m512 table = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m128i mask = _mm_set1_epi8(0x0F);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK4_0) {
    const __m512 ad = _mm512_set1_ps(a * _cvtsh_ss(b[i].d));
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs));
    const __m512 lo = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_and_si128(raw, mask)), table);
    const __m512 hi = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(raw, 4), mask)), table);
    _mm512_storeu_ps(y, _mm512_fmadd_ps(lo, ad, _mm512_loadu_ps(y)));
    _mm512_storeu_ps(y + 16, _mm512_fmadd_ps(hi, ad, _mm512_loadu_ps(y + 16)));
  }
}

// Several rows into the same y, block by block: y is loaded and stored once per block for all of
// them and their rows stream in side by side. Per value the same fmas in the same (row) order as
// one axpy_q4_0_avx512 call per row, so the same floats.
template <int R>
__attribute__((target(EMBER_AVX512))) inline void axpy_q4_0_rows_avx512(int64_t n_blocks, const float* a,
                                                                        const void* const* x, float* y) {
  const block_q4_0* b[R];
  for (int r = 0; r < R; ++r) b[r] = static_cast<const block_q4_0*>(x[r]);
  const __m512 table = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m128i mask = _mm_set1_epi8(0x0F);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK4_0) {
    __m512 ylo = _mm512_loadu_ps(y), yhi = _mm512_loadu_ps(y + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 ad = _mm512_set1_ps(a[r] * _cvtsh_ss(b[r][i].d));
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[r][i].qs));
      const __m512 lo = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_and_si128(raw, mask)), table);
      const __m512 hi = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(raw, 4), mask)), table);
      ylo = _mm512_fmadd_ps(lo, ad, ylo);
      yhi = _mm512_fmadd_ps(hi, ad, yhi);
    }
    _mm512_storeu_ps(y, ylo);
    _mm512_storeu_ps(y + 16, yhi);
  }
}

__attribute__((target(EMBER_AVX512))) void axpy_q4_0_rows_avx512_any(int64_t n_blocks, const float* a,
                                                                     const void* const* x, int n, float* y) {
  int r = 0;
  for (; r + 8 <= n; r += 8) axpy_q4_0_rows_avx512<8>(n_blocks, a + r, x + r, y);
  if (r + 4 <= n) { axpy_q4_0_rows_avx512<4>(n_blocks, a + r, x + r, y); r += 4; }
  if (r + 2 <= n) { axpy_q4_0_rows_avx512<2>(n_blocks, a + r, x + r, y); r += 2; }
  if (r < n) axpy_q4_0_rows_avx512<1>(n_blocks, a + r, x + r, y);
}

__attribute__((target(EMBER_AVX512))) void axpy_q8_0_avx512(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q8_0*>(x);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK8_0) {
    const __m512 ad = _mm512_set1_ps(a * _cvtsh_ss(b[i].d));
    const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs))));
    const __m512 hi =
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs + 16))));
    _mm512_storeu_ps(y, _mm512_fmadd_ps(lo, ad, _mm512_loadu_ps(y)));
    _mm512_storeu_ps(y + 16, _mm512_fmadd_ps(hi, ad, _mm512_loadu_ps(y + 16)));
  }
}
#pragma GCC diagnostic pop
#undef EMBER_AVX512
#endif

bool use_avx512() {
#if defined(EMBER_HAVE_X86_SIMD)
  static const bool yes = active_kernel_set() == KernelSet::Avx512Vnni && cpu_has_avx512_vnni();
  return yes;
#else
  return false;
#endif
}

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
  if (use_avx512()) return axpy_q4_0_avx512(n_blocks, a, x, y);
  if (use_avx2()) return axpy_q4_0_avx2(n_blocks, a, x, y);
#endif
  axpy_q4_0_scalar(n_blocks, a, x, y);
}

void axpy_q4_0_rows(int64_t n_blocks, const float* a, const void* const* x, int n, float* y) {
#if defined(EMBER_HAVE_X86_SIMD)
  if (use_avx512()) return axpy_q4_0_rows_avx512_any(n_blocks, a, x, n, y);
  if (use_avx2()) return axpy_q4_0_rows_avx2_any(n_blocks, a, x, n, y);
#endif
  for (int r = 0; r < n; ++r) axpy_q4_0(n_blocks, a[r], x[r], y);
}

void axpy_q8_0(int64_t n_blocks, float a, const void* x, float* y) {
#if defined(EMBER_HAVE_X86_SIMD)
  if (use_avx512()) return axpy_q8_0_avx512(n_blocks, a, x, y);
  if (use_avx2()) return axpy_q8_0_avx2(n_blocks, a, x, y);
#endif
  axpy_q8_0_scalar(n_blocks, a, x, y);
}

}  // namespace ember
