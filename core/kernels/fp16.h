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
}  // namespace ember
