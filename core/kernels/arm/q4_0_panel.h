#pragma once
// The ARM repacked Q4_0 layout (Q4_0Panels, kernel_impl.h): panels of 4 rows whose quant bytes are
// interleaved 8 at a time, so that one 16-byte load holds 8 quant bytes of each of two rows. That
// is the operand shape of smmla (a 2x8 by 8x2 int8 matrix product into a 2x2 int32 tile:
// q4_0_panel_i8mm.cpp); q4_0_panel_dotprod.cpp runs the same layout on sdot.
//
// Panel layout, per block b (72 bytes, the same as 4 Q4_0 blocks):
//   uint16 d[4]            the 4 rows' scales
//   uint8  qs[2][4][8]     half h, row r: bytes qs[8h .. 8h+7] of row r's block b, each XOR 0x88
// Byte j of a Q4_0 block holds element j (low nibble) and element 16 + j (high nibble), so half h
// covers elements 8h..8h+7 (low nibbles) and 16+8h..16+8h+7 (high nibbles); the vector at
// 8 + 32h + 16p holds rows 2p and 2p+1 of half h.
//
// The XOR makes each nibble q ^ 8, whose 4-bit two's complement value is q - 8, the signed quant:
// shifting a byte left by 4 (low nibble) or masking it with 0xF0 (high nibble) gives 16 * (q - 8)
// as a signed byte, with no subtraction and no per-token offset sums. The int32 sums are then 16
// times the true ones; a fixed-point convert with 4 fraction bits (vcvtq_n_f32_s32) divides by 16
// exactly (|sum| <= 32 * 128 * 127 < 2^24).
#include "core/kernels/arm/neon_helpers.h"
#include "core/kernels/quant_blocks.h"

namespace ember::neon {

constexpr size_t kPanel4BlockBytes = 8 + 64;

// The 16 * (q - 8) bytes of the low and high nibbles of a panel vector.
static inline int8x16_t panel_low(int8x16_t v) { return vshlq_n_s8(v, 4); }
static inline int8x16_t panel_high(int8x16_t v) { return vandq_s8(v, vdupq_n_s8(static_cast<int8_t>(0xF0))); }

// The 4 rows' scales of a panel block as floats.
static inline float32x4_t panel_scales(const uint8_t* block) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(block))));
}

}  // namespace ember::neon
