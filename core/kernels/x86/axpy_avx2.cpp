// AVX2/FMA/F16C down accumulation of the sparse FFN (sparse_kernels.h): the same floats as the
// generic reference. This file is built with -mfma, and GCC contracts a * x + y into one fma in
// C++ by default (-ffp-contract=fast), which rounds once instead of twice: the F32/F16 products
// go through rounded_product(), and their scalar tails to the reference itself.
#include <immintrin.h>

#include <bit>

#include "core/kernels/fp16.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/row_groups.h"

namespace ember::avx2 {
namespace {

// The product a * x rounded to float on its own: the empty asm makes it an opaque value, so it
// cannot be fused with the add that follows (no instruction is emitted for it).
inline __m256 rounded_product(__m256 a, __m256 x) {
  __m256 p = _mm256_mul_ps(a, x);
  __asm__("" : "+x"(p));
  return p;
}

// 8 int32 lanes -> y[0..8) = fma(float(q), ad, y)
inline void fma8_i32(__m256i q, __m256 ad, float* y) {
  _mm256_storeu_ps(y, _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), ad, _mm256_loadu_ps(y)));
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

// Byte `byte` of the floats q - 8, q = 0..15, repeated for both 128-bit lanes: a constant, loaded
// like the operand of _mm256_setr_epi8.
struct alignas(32) Q4FloatBytes {
  uint8_t v[32];
};
constexpr Q4FloatBytes q4_float_bytes(int byte) {
  Q4FloatBytes t{};
  for (int i = 0; i < 32; ++i) t.v[i] = q4_float_byte(i % 16, byte);
  return t;
}
constexpr Q4FloatBytes kQ4FloatByte2 = q4_float_bytes(2), kQ4FloatByte3 = q4_float_bytes(3);

// Several rows into the same y, block by block: y's 32 floats are loaded and stored once per
// block for all rows and the rows stream in side by side. Per value the same fmas in the same
// (row) order as one axpy_q4_0 call per row, so the same floats.
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
inline void axpy_q4_0_rows_n(int64_t n_blocks, const float* a, const void* const* x, float* y) {
  const block_q4_0* b[R];
  for (int r = 0; r < R; ++r) b[r] = static_cast<const block_q4_0*>(x[r]);
  const __m256i byte2 = _mm256_load_si256(reinterpret_cast<const __m256i*>(kQ4FloatByte2.v));
  const __m256i byte3 = _mm256_load_si256(reinterpret_cast<const __m256i*>(kQ4FloatByte3.v));
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

}  // namespace

void axpy_f32(int64_t n, float a, const float* x, float* y) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8);
    y0 = _mm256_add_ps(y0, rounded_product(va, _mm256_loadu_ps(x + i)));
    y1 = _mm256_add_ps(y1, rounded_product(va, _mm256_loadu_ps(x + i + 8)));
    _mm256_storeu_ps(y + i, y0);
    _mm256_storeu_ps(y + i + 8, y1);
  }
  generic::axpy_f32(n - i, a, x + i, y + i);
}

void axpy_f16(int64_t n, float a, const uint16_t* x, float* y) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 x1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 8)));
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), rounded_product(va, x0)));
    _mm256_storeu_ps(y + i + 8, _mm256_add_ps(_mm256_loadu_ps(y + i + 8), rounded_product(va, x1)));
  }
  generic::axpy_f16(n - i, a, x + i, y + i);
}

void axpy_q4_0(int64_t n_blocks, float a, const void* x, float* y) {
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

void axpy_q8_0(int64_t n_blocks, float a, const void* x, float* y) {
  const auto* b = static_cast<const block_q8_0*>(x);
  for (int64_t i = 0; i < n_blocks; ++i, y += kQK8_0) {
    const __m256 ad = _mm256_set1_ps(a * _cvtsh_ss(b[i].d));
    for (int j = 0; j < kQK8_0; j += 8) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + j));
      fma8_i32(_mm256_cvtepi8_epi32(q), ad, y + j);
    }
  }
}

void axpy_q4_0_rows(int64_t n_blocks, const float* a, const void* const* x, int n, float* y) {
  for_row_groups(n, [&]<int R>(int r) { axpy_q4_0_rows_n<R>(n_blocks, a + r, x + r, y); });
}

}  // namespace ember::avx2
