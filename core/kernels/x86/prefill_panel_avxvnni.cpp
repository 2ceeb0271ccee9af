// Q4_0 products (prefill, and decode from a repacked copy) on a repacked "panel" of 8 rows: the
// 4-byte groups of the 8 rows' blocks are interleaved so that one 32-byte vector holds 4 consecutive quants of each
// of the 8 rows. A vpdpbusd of that vector with 4 activation bytes broadcast to all lanes then adds
// 4 products to each row's sum: every lane stays one row, so no horizontal sums are needed and
// the results for 8 rows of a token are stored with one instruction (y is token-major).
// prefill_panel_avx2.cpp runs the same kernel (panel_kernel.h) with maddubs + madd + add.
//
// Panel layout, per block b (144 bytes, the same as 8 Q4_0 blocks):
//   uint16 d[8]                      the 8 rows' scales
//   uint8  chunk[4][8][4]            chunk c, row r: bytes qs[4c .. 4c+3] of row r's block b
// The low nibbles of chunk c are elements 4c..4c+3, the high nibbles elements 16+4c..16+4c+3.
#include <cstring>

#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/x86/avx2_helpers.h"

#define EMBER_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#define EMBER_PANEL_TARGET EMBER_AVXVNNI

namespace ember::avx2 {
namespace {

struct Vnni {
  EMBER_AVXVNNI static __m256i dot4(__m256i acc, __m256i u8, __m256i s8) { return _mm256_dpbusd_avx_epi32(acc, u8, s8); }
};

}  // namespace
}  // namespace ember::avx2

#include "core/kernels/x86/panel_kernel.h"

namespace ember::avx2 {

void repack_q4_0_panel8(int64_t nb, const void* rows, size_t row_stride, void* panel) {
  auto* out = static_cast<uint8_t*>(panel);
  const auto* row_bytes = static_cast<const uint8_t*>(rows);
  for (int64_t b = 0; b < nb; ++b, out += kPanelBlockBytes) {
    for (int r = 0; r < 8; ++r) {
      const auto& block = reinterpret_cast<const block_q4_0*>(row_bytes + r * row_stride)[b];
      std::memcpy(out + 2 * r, &block.d, 2);
      for (int c = 0; c < 4; ++c) std::memcpy(out + 16 + 32 * c + 4 * r, block.qs + 4 * c, 4);
    }
  }
}

void q8_0_bias_sums(int64_t nb, const void* act, int32_t bias, int32_t* out) {
  const auto* x = static_cast<const block_q8_0*>(act);
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sum = 0;
    for (int j = 0; j < kQK8_0; ++j) sum += x[b].qs[j];
    out[b] = -bias * sum;
  }
}

void panel_gemm_q4_0_vnni(int64_t nb, const void* panel, const void* acts, size_t act_stride, const int32_t* bias_sums,
                          size_t sums_stride, int n_tokens, float* y, size_t y_stride) {
  panel_dispatch<Vnni>(nb, panel, acts, act_stride, bias_sums, sums_stride, n_tokens, y, y_stride);
}

}  // namespace ember::avx2
