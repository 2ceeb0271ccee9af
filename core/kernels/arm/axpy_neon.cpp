// NEON down accumulation of the sparse FFN (sparse_kernels.h): the same floats as the generic
// reference. aarch64 has fma in its base ISA and GCC contracts a * x + y into one by default
// (-ffp-contract=fast), which rounds once instead of twice: the F32/F16 products go through
// rounded_product(), and their scalar tails to the reference itself (which guards its own).
#include <bit>

#include "core/kernels/arm/neon_helpers.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/row_groups.h"

namespace ember::neon {
namespace {

// a * x rounded to float on its own: the empty asm makes it an opaque value that cannot be fused
// with the add that follows (no instruction is emitted for it).
inline float32x4_t rounded_product(float32x4_t a, float32x4_t x) {
  float32x4_t p = vmulq_f32(a, x);
  __asm__("" : "+w"(p));
  return p;
}

// Bytes 2 and 3 of the float q - 8 for q = 0..15 (its low 16 bits are zero: every integer in
// [-8, 7] has at most 3 significant bits), as tbl tables: two lookups and two rounds of zips
// with zero give the floats themselves, 8 instructions per 16 values instead of 10 (sign
// extension twice, int -> float) plus the subtraction of 8.
constexpr uint8_t q4_float_byte(int q, int byte) {
  return static_cast<uint8_t>(std::bit_cast<uint32_t>(static_cast<float>(q - 8)) >> (8 * byte));
}
static_assert([] {
  for (int q = 0; q < 16; ++q) {
    if ((std::bit_cast<uint32_t>(static_cast<float>(q - 8)) & 0xFFFFu) != 0) return false;
  }
  return true;
}());
struct alignas(16) Q4FloatBytes {
  uint8_t v[16];
};
constexpr Q4FloatBytes q4_float_bytes(int byte) {
  Q4FloatBytes t{};
  for (int q = 0; q < 16; ++q) t.v[q] = q4_float_byte(q, byte);
  return t;
}
constexpr Q4FloatBytes kQ4FloatByte2 = q4_float_bytes(2), kQ4FloatByte3 = q4_float_bytes(3);

// The floats q - 8 of 16 nibbles (values 0..15 in q), in order, as 4 vectors.
inline void q4_floats(uint8x16_t q, uint8x16_t byte2, uint8x16_t byte3, float32x4_t* f) {
  const uint8x16_t lo = vqtbl1q_u8(byte2, q), hi = vqtbl1q_u8(byte3, q);
  const uint16x8_t w0 = vreinterpretq_u16_u8(vzip1q_u8(lo, hi)), w1 = vreinterpretq_u16_u8(vzip2q_u8(lo, hi));
  const uint16x8_t zero = vdupq_n_u16(0);
  f[0] = vreinterpretq_f32_u16(vzip1q_u16(zero, w0));
  f[1] = vreinterpretq_f32_u16(vzip2q_u16(zero, w0));
  f[2] = vreinterpretq_f32_u16(vzip1q_u16(zero, w1));
  f[3] = vreinterpretq_f32_u16(vzip2q_u16(zero, w1));
}

// R rows into the same y, block by block: y's 32 floats stay in 8 registers while the R rows
// stream in side by side. Per value the same fmas in the same (row) order as one axpy_q4_0 call
// per row, so the same floats; a * d is rounded once per block and row, as the reference does.
template <int R>
void axpy_q4_0_rows_n(int64_t n_blocks, const float* a, const void* const* x, float* y) {
  const block_q4_0* b[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) b[r] = static_cast<const block_q4_0*>(x[r]);
  const uint8x16_t byte2 = vld1q_u8(kQ4FloatByte2.v), byte3 = vld1q_u8(kQ4FloatByte3.v);
  const uint8x16_t low4 = vdupq_n_u8(0x0F);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK4_0) {
    float32x4_t acc[8];
    #pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) acc[k] = vld1q_f32(y + 4 * k);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float ad = a[r] * half_to_float(b[r][i].d);
      const uint8x16_t packed = vld1q_u8(b[r][i].qs);
      float32x4_t f[8];
      q4_floats(vandq_u8(packed, low4), byte2, byte3, f);
      q4_floats(vshrq_n_u8(packed, 4), byte2, byte3, f + 4);
      #pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) acc[k] = vfmaq_n_f32(acc[k], f[k], ad);
    }
    #pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) vst1q_f32(y + 4 * k, acc[k]);
  }
}

}  // namespace

void axpy_f32(int64_t n, float a, const float* x, float* y) {
  const float32x4_t va = vdupq_n_f32(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), rounded_product(va, vld1q_f32(x + i))));
    vst1q_f32(y + i + 4, vaddq_f32(vld1q_f32(y + i + 4), rounded_product(va, vld1q_f32(x + i + 4))));
  }
  generic::axpy_f32(n - i, a, x + i, y + i);
}

void axpy_f16(int64_t n, float a, const uint16_t* x, float* y) {
  const float32x4_t va = vdupq_n_f32(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(x + i));
    vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), rounded_product(va, vcvt_f32_f16(vget_low_f16(h)))));
    vst1q_f32(y + i + 4, vaddq_f32(vld1q_f32(y + i + 4), rounded_product(va, vcvt_high_f32_f16(h))));
  }
  generic::axpy_f16(n - i, a, x + i, y + i);
}

void axpy_q4_0(int64_t n_blocks, float a, const void* x, float* y) {
  const void* rows[1] = {x};
  axpy_q4_0_rows_n<1>(n_blocks, &a, rows, y);
}

void axpy_q8_0(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q8_0*>(x);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK8_0) {
    const float ad = a * half_to_float(b[i].d);
    #pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const int8x16_t q = vld1q_s8(b[i].qs + 16 * h);
      const int16x8_t w0 = vmovl_s8(vget_low_s8(q)), w1 = vmovl_high_s8(q);
      const int32x4_t v[4] = {vmovl_s16(vget_low_s16(w0)), vmovl_high_s16(w0), vmovl_s16(vget_low_s16(w1)),
                              vmovl_high_s16(w1)};
      float* yy = y + 16 * h;
      #pragma GCC unroll 8
      for (int k = 0; k < 4; ++k) vst1q_f32(yy + 4 * k, vfmaq_n_f32(vld1q_f32(yy + 4 * k), vcvtq_f32_s32(v[k]), ad));
    }
  }
}

void axpy_q4_0_rows(int64_t n_blocks, const float* a, const void* const* x, int n, float* y) {
  for_row_groups(n, [&]<int R>(int r) { axpy_q4_0_rows_n<R>(n_blocks, a + r, x + r, y); });
}

}  // namespace ember::neon
