#pragma once
// y += a * x over float or F16 rows: the down accumulation of the sparse FFN. Multiply then add
// (never fused), so the AVX2 path gives the same floats as the scalar one.
#include <cstdint>

namespace ember {

void axpy(int64_t n, float a, const float* x, float* y);
void axpy_f16(int64_t n, float a, const uint16_t* x, float* y);

}  // namespace ember
