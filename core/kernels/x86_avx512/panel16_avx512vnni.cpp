// Q4_0 products (prefill, and decode from a repacked copy) with AVX-512 VNNI on panels of 16
// rows: the same idea as the 8-row AVX-VNNI panels (x86/prefill_panel_avxvnni.cpp), widened so
// one 64-byte vector holds 4 consecutive quants of each of 16 rows. A vpdpbusd of that vector
// with 4 activation bytes broadcast to all lanes adds 4 products to each row's sum; every lane
// stays one row, so the 16 results of a token are stored with one instruction (y is token-major).
//
// Panel layout, per block b (288 bytes, the same as 16 Q4_0 blocks):
//   uint16 d[16]                     the 16 rows' scales
//   uint8  chunk[4][16][4]           chunk c, row r: bytes qs[4c .. 4c+3] of row r's block b
// The low nibbles of chunk c are elements 4c..4c+3, the high nibbles elements 16+4c..16+4c+3.
//
// This file is compiled with -mavx512*: it must not include headers with inline functions or
// templates that other files also instantiate (the linker could keep this file's AVX-512 copy
// for everyone), hence only intrinsics, plain structs and local helpers.
// GCC 12 warns that the _mm512_undefined_ps() inside _mm512_cvtph_ps/_mm512_cvtepi32_ps "may be
// used uninitialized": a false positive in its own headers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"

namespace ember::avx512 {
namespace {

constexpr int kRows = 16;
constexpr size_t kBlockBytes = 2 * kRows + 16 * kRows;

float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

__m512i broadcast_dword(const int8_t* a) {
  int32_t word;
  std::memcpy(&word, a, sizeof word);
  return _mm512_set1_epi32(word);
}

template <int NT>
void panel16_kernel(int64_t nb, const uint8_t* panel, const uint8_t* acts, size_t act_stride, const int32_t* bias_sums,
                    size_t sums_stride, float* y, size_t y_stride) {
  const block_q8_0* x[NT];
  const int32_t* sums[NT];
  for (int t = 0; t < NT; ++t) {
    x[t] = reinterpret_cast<const block_q8_0*>(acts + t * act_stride);
    sums[t] = bias_sums + t * sums_stride;
  }
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, panel += kBlockBytes) {
    const __m512 row_d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel)));
    __m512i q[8];
    for (int c = 0; c < 4; ++c) {
      const __m512i chunk = _mm512_loadu_si512(panel + 2 * kRows + 64 * c);
      q[c] = _mm512_and_si512(chunk, low_nibbles);
      q[c + 4] = _mm512_and_si512(_mm512_srli_epi16(chunk, 4), low_nibbles);
    }
    for (int t = 0; t < NT; ++t) {
      const int8_t* a = x[t][b].qs;
      // Two chains: the first starts from -8 * sum(a), which undoes the unsigned nibbles' offset.
      __m512i even = _mm512_set1_epi32(sums[t][b]);
      __m512i odd = _mm512_setzero_si512();
      for (int k = 0; k < 8; k += 2) {
        even = _mm512_dpbusd_epi32(even, q[k], broadcast_dword(a + 4 * k));
        odd = _mm512_dpbusd_epi32(odd, q[k + 1], broadcast_dword(a + 4 * k + 4));
      }
      const __m512 scale = _mm512_mul_ps(row_d, _mm512_set1_ps(half_to_float(x[t][b].d)));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)), scale, acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
}

}  // namespace

void repack_q4_0_panel16(int64_t nb, const void* rows, size_t row_stride, void* panel) {
  auto* out = static_cast<uint8_t*>(panel);
  const auto* row_bytes = static_cast<const uint8_t*>(rows);
  for (int64_t b = 0; b < nb; ++b, out += kBlockBytes) {
    for (int r = 0; r < kRows; ++r) {
      const auto& block = reinterpret_cast<const block_q4_0*>(row_bytes + r * row_stride)[b];
      std::memcpy(out + 2 * r, &block.d, 2);
      for (int c = 0; c < 4; ++c) std::memcpy(out + 2 * kRows + 64 * c + 4 * r, block.qs + 4 * c, 4);
    }
  }
}

void panel16_gemm_q4_0(int64_t nb, const void* panel, const void* acts, size_t act_stride, const int32_t* bias_sums,
                       size_t sums_stride, int n_tokens, float* y, size_t y_stride) {
  const auto* p = static_cast<const uint8_t*>(panel);
  const auto* a = static_cast<const uint8_t*>(acts);
  switch (n_tokens) {
    case 8: panel16_kernel<8>(nb, p, a, act_stride, bias_sums, sums_stride, y, y_stride); break;
    case 7: panel16_kernel<7>(nb, p, a, act_stride, bias_sums, sums_stride, y, y_stride); break;
    case 6: panel16_kernel<6>(nb, p, a, act_stride, bias_sums, sums_stride, y, y_stride); break;
    case 5: panel16_kernel<5>(nb, p, a, act_stride, bias_sums, sums_stride, y, y_stride); break;
    case 4: panel16_kernel<4>(nb, p, a, act_stride, bias_sums, sums_stride, y, y_stride); break;
    case 3: panel16_kernel<3>(nb, p, a, act_stride, bias_sums, sums_stride, y, y_stride); break;
    case 2: panel16_kernel<2>(nb, p, a, act_stride, bias_sums, sums_stride, y, y_stride); break;
    case 1: panel16_kernel<1>(nb, p, a, act_stride, bias_sums, sums_stride, y, y_stride); break;
    default: break;
  }
}

}  // namespace ember::avx512
