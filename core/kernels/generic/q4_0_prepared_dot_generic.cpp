// Scalar reference of the prepared-input Q4_0 dot (q4_0_prepared_input.h): the same integer block
// sums as vec_dot_q4_0_q8_0, the SIMD sets differ from it only in float summation order.
#include "core/kernels/fp16.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/q4_0_prepared_view.h"
#include "core/kernels/quant_blocks.h"

namespace ember::generic {

float dot_q4_0_prepared(const void* row, const Q4PreparedView& x) {
  const auto* w = static_cast<const block_q4_0*>(row);
  float sum = 0.0f;
  for (int64_t b = 0; b < x.n_blocks; ++b) {
    int32_t s = 0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int lo = w[b].qs[j] & 0x0F, hi = w[b].qs[j] >> 4;
      s += (lo - 8) * x.qs[kQK8_0 * b + j];
      s += (hi - 8) * x.qs[kQK8_0 * b + j + kQK4_0 / 2];
    }
    sum += static_cast<float>(s) * (fp16_to_fp32(w[b].d) * x.d[b]);
  }
  return sum;
}

void dot_q4_0_prepared_rows(const void* const* rows, int n, const Q4PreparedView& x, float* out, RowsAhead) {
  for (int r = 0; r < n; ++r) out[r] = dot_q4_0_prepared(rows[r], x);
}

}  // namespace ember::generic
