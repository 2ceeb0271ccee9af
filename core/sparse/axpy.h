#pragma once
// y += a * x over float or F16 rows: the down accumulation of the sparse FFN. Multiply then add
// (never fused), so the AVX2 path gives the same floats as the scalar one.
#include <cstdint>

namespace ember {

void axpy(int64_t n, float a, const float* x, float* y);
void axpy_f16(int64_t n, float a, const uint16_t* x, float* y);
// y += a * dequantize(x) for n_blocks Q4_0 / Q8_0 blocks (32 values each), without a temporary:
// y = fma(q - 8, a * d, y) per value (Q8_0: fma(q, a * d, y)), a * d rounded once per block: one
// rounding per value instead of three (dequantize, scale, add). The SIMD versions use the same
// fused operation, so every path gives the same floats.
void axpy_q4_0(int64_t n_blocks, float a, const void* x, float* y);
void axpy_q8_0(int64_t n_blocks, float a, const void* x, float* y);
// axpy_q4_0(n_blocks, a[r], x[r], y) for r = 0 .. n-1 in that order, the same floats, with the rows
// read side by side where the CPU has a multi-row kernel (AVX-512 and AVX2: y loaded and stored once per
// block for up to 8 rows, and more memory reads in flight for rows at random addresses).
void axpy_q4_0_rows(int64_t n_blocks, const float* a, const void* const* x, int n, float* y);

}  // namespace ember
