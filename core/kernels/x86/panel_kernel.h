#pragma once
// The Q4_0 panel kernel body shared by prefill_panel_avx2.cpp and prefill_panel_avxvnni.cpp (the
// layout is described in the latter). Each includer defines EMBER_PANEL_TARGET (its function
// target attribute) and an Isa struct with dot4(acc, u8, s8) before including: the AVX2 copy must
// not carry the avxvnni target, or the compiler could fuse its maddubs/madd into VNNI instructions.
#include <cstring>

#include "core/kernels/quant_blocks.h"
#include "core/kernels/x86/avx2_helpers.h"

namespace ember::avx2 {
namespace {

constexpr size_t kPanelBlockBytes = 16 + 128;

template <class Isa, int NT>
EMBER_PANEL_TARGET void panel_kernel(int64_t nb, const uint8_t* panel, const uint8_t* acts, size_t act_stride,
                                const int32_t* bias_sums, size_t sums_stride, float* y, size_t y_stride) {
  const block_q8_0* x[NT];
  const int32_t* sums[NT];
  for (int t = 0; t < NT; ++t) {
    x[t] = reinterpret_cast<const block_q8_0*>(acts + t * act_stride);
    sums[t] = bias_sums + t * sums_stride;
  }
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, panel += kPanelBlockBytes) {
    const __m256 row_d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(panel)));
    __m256i q[8];
    for (int c = 0; c < 4; ++c) {
      const __m256i chunk = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + 16 + 32 * c));
      q[c] = _mm256_and_si256(chunk, low_nibbles);
      q[c + 4] = _mm256_and_si256(_mm256_srli_epi16(chunk, 4), low_nibbles);
    }
    for (int t = 0; t < NT; ++t) {
      const int8_t* a = x[t][b].qs;
      auto broadcast4 = [a](int k) {
        int32_t word;
        std::memcpy(&word, a + 4 * k, sizeof word);
        return _mm256_set1_epi32(word);
      };
      // Two chains: the first starts from -8 * sum(a), which undoes the unsigned nibbles' offset.
      __m256i even = _mm256_set1_epi32(sums[t][b]);
      __m256i odd = _mm256_setzero_si256();
      for (int k = 0; k < 8; k += 2) {
        even = Isa::dot4(even, q[k], broadcast4(k));
        odd = Isa::dot4(odd, q[k + 1], broadcast4(k + 1));
      }
      const __m256 scale = _mm256_mul_ps(row_d, _mm256_set1_ps(half_to_float(x[t][b].d)));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(even, odd)), scale, acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * y_stride, acc[t]);
}

template <class Isa>
EMBER_PANEL_TARGET void panel_dispatch(int64_t nb, const void* panel, const void* acts, size_t act_stride,
                                  const int32_t* bias_sums, size_t sums_stride, int n_tokens, float* y, size_t y_stride) {
  const auto* p = static_cast<const uint8_t*>(panel);
  const auto* a = static_cast<const uint8_t*>(acts);
  switch (n_tokens) {
    case 4: panel_kernel<Isa, 4>(nb, p, a, act_stride, bias_sums, sums_stride, y, y_stride); break;
    case 3: panel_kernel<Isa, 3>(nb, p, a, act_stride, bias_sums, sums_stride, y, y_stride); break;
    case 2: panel_kernel<Isa, 2>(nb, p, a, act_stride, bias_sums, sums_stride, y, y_stride); break;
    case 1: panel_kernel<Isa, 1>(nb, p, a, act_stride, bias_sums, sums_stride, y, y_stride); break;
    default: break;
  }
}

}  // namespace
}  // namespace ember::avx2
