#pragma once
// The quantized block layouts, bit-compatible with ggml-common.h so that tensors read from a GGUF
// file (or written by Ember) can be used in place. All scales are IEEE half stored as raw bits.
#include <cstdint>

namespace ember {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK_K = 256;  // super-block size of the K-quants

// value = (q - 8) * d; low nibbles hold elements 0..15, high nibbles 16..31.
struct block_q4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(block_q4_0) == 18, "block_q4_0 must match ggml");

// value = q * d
struct block_q8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 must match ggml");

// 8 sub-blocks of 32; value = d * scale_j * q - dmin * min_j with 6-bit scale/min packed in 12 bytes.
// Each 32-byte chunk of qs holds two sub-blocks: low nibbles the first, high nibbles the second.
struct block_q4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(block_q4_K) == 144, "block_q4_K must match ggml");

// 16 sub-blocks of 16; value = d * scales[j] * (q - 32), q = 4 low bits (ql) | 2 high bits (qh).
struct block_q6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(block_q6_K) == 210, "block_q6_K must match ggml");

// Activation format for K-quant dot products: float scale, and sums of each 16 quants so the
// weights' minimum/offset terms cost one multiply per 16 elements.
struct block_q8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(block_q8_K) == 292, "block_q8_K must match ggml");

// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K block.
inline void q4_K_scale_min(int j, const uint8_t* packed, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = packed[j] & 63;
    min = packed[j + 4] & 63;
  } else {
    scale = static_cast<uint8_t>((packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4));
    min = static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

}  // namespace ember
