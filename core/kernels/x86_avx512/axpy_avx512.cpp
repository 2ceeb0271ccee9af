// AVX-512 down accumulation of the sparse FFN for Q4_0 and Q8_0 rows (sparse_kernels.h): the same
// floats as the generic reference. A block is two 16-float halves; vpermps looks (q - 8) up in a
// 16-entry float table straight from the zero-extended nibbles (no int -> float conversion).
// Built with -mavx512*: only intrinsics, plain structs and local helpers here (see
// panel16_avx512vnni.cpp for why).
// GCC 12 warns that the undefined vectors inside its own AVX-512 intrinsics "may be used
// uninitialized": a false positive in its headers. Clang has no such warning (nor this pragma's
// option name), hence the guard.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/row_groups.h"

namespace ember::avx512 {
namespace {

inline __m512 q4_0_table() { return _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7); }

// The floats q - 8 of a block's elements 0..15 (lo) and 16..31 (hi).
inline void q4_0_floats(const block_q4_0& b, __m512 table, __m512& lo, __m512& hi) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
  lo = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_and_si128(raw, mask)), table);
  hi = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(raw, 4), mask)), table);
}

// Several rows into the same y, block by block: y is loaded and stored once per block for all of
// them and their rows stream in side by side. Per value the same fmas in the same (row) order as
// one axpy_q4_0 call per row, so the same floats.
template <int R>
inline void axpy_q4_0_rows_n(int64_t n_blocks, const float* a, const void* const* x, float* y) {
  const block_q4_0* b[R];
  for (int r = 0; r < R; ++r) b[r] = static_cast<const block_q4_0*>(x[r]);
  const __m512 table = q4_0_table();
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK4_0) {
    __m512 ylo = _mm512_loadu_ps(y), yhi = _mm512_loadu_ps(y + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 ad = _mm512_set1_ps(a[r] * _cvtsh_ss(b[r][i].d));
      __m512 lo, hi;
      q4_0_floats(b[r][i], table, lo, hi);
      ylo = _mm512_fmadd_ps(lo, ad, ylo);
      yhi = _mm512_fmadd_ps(hi, ad, yhi);
    }
    _mm512_storeu_ps(y, ylo);
    _mm512_storeu_ps(y + 16, yhi);
  }
}

}  // namespace

void axpy_q4_0(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q4_0*>(x);
  const __m512 table = q4_0_table();
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK4_0) {
    const __m512 ad = _mm512_set1_ps(a * _cvtsh_ss(b[i].d));
    __m512 lo, hi;
    q4_0_floats(b[i], table, lo, hi);
    _mm512_storeu_ps(y, _mm512_fmadd_ps(lo, ad, _mm512_loadu_ps(y)));
    _mm512_storeu_ps(y + 16, _mm512_fmadd_ps(hi, ad, _mm512_loadu_ps(y + 16)));
  }
}

void axpy_q4_0_rows(int64_t n_blocks, const float* a, const void* const* x, int n, float* y) {
  for_row_groups(n, [&]<int R>(int r) { axpy_q4_0_rows_n<R>(n_blocks, a + r, x + r, y); });
}

void axpy_q8_0(int64_t n_blocks, float a, const void* x, float* y) {
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

}  // namespace ember::avx512
