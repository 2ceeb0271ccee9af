// The repacker of the ARM Q4_0 panels (layout in q4_0_panel.h): plain byte moves, ARMv8.0.
#include <cstring>

#include "core/kernels/arm/q4_0_panel.h"
#include "core/kernels/kernel_impl.h"

namespace ember::neon {

void repack_q4_0_panel4(int64_t nb, const void* rows, size_t row_stride, void* panel) {
  auto* out = static_cast<uint8_t*>(panel);
  const auto* row_bytes = static_cast<const uint8_t*>(rows);
  for (int64_t b = 0; b < nb; ++b, out += kPanel4BlockBytes) {
    for (int r = 0; r < 4; ++r) {
      const auto& block = reinterpret_cast<const block_q4_0*>(row_bytes + r * row_stride)[b];
      std::memcpy(out + 2 * r, &block.d, 2);
      for (int h = 0; h < 2; ++h) {
        for (int j = 0; j < 8; ++j) out[8 + 32 * h + 8 * r + j] = block.qs[8 * h + j] ^ 0x88;
      }
    }
  }
}

}  // namespace ember::neon
