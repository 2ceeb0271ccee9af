#pragma once
// IEEE half and bfloat16 <-> float conversions, bit-exact with ggml's (round to nearest even).
#include <cstdint>

namespace ember {
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);
}  // namespace ember

namespace ember {
// Whole rows, using F16C when the CPU has it (results identical to the scalar functions).
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);

// fp16_to_fp32(h) for every h, as a 65536-entry table (256 KiB, built once on first use, never
// written afterwards). For the sparse kernels' per-block weight scales: one broadcast load from the
// table replaces the scalar extract, F16C convert and broadcast (measured: the Q4_0 row dot 23 %
// faster in cache on a Zen 2 without AVX-512). Only the entries of the scales a model uses are
// ever touched, a few KiB of it.
const float* fp16_to_fp32_table();
}  // namespace ember
