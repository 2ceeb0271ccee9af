#include "core/kernels/q4_0_prepared_input.h"

#include <cstring>

#include "core/kernels/fp16.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/type_traits.h"

namespace ember {

void Q4PreparedInput::reserve(int64_t n) {
  const auto blocks = static_cast<size_t>((n + kQK8_0 - 1) / kQK8_0);
  qs.assign(blocks * kQK8_0, 0);
  d.assign(blocks, 0.0f);
  corr.assign(blocks * 8, 0);
  qs_pairs.assign(blocks / 2 * 64, 0);
  corr_pairs.assign(blocks / 2 * 16, 0);
  d_pairs.assign(blocks / 2 * 16, 0.0f);
}

void Q4PreparedInput::prepare(const float* x, int64_t n) {
  n_blocks = n / kQK8_0;
  // The Q8_0 quantizer the dense path uses, one block at a time, so the integers are the same.
  const KernelTraits& q8 = *kernel_traits(GgmlType::Q8_0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    block_q8_0 blk;
    q8.from_float(x + kQK8_0 * b, &blk, kQK8_0);
    std::memcpy(&qs[static_cast<size_t>(kQK8_0 * b)], blk.qs, kQK8_0);
    d[static_cast<size_t>(b)] = fp16_to_fp32(blk.d);
    for (int g = 0; g < 8; ++g) {
      const int8_t* v = blk.qs + 4 * g;
      corr[static_cast<size_t>(8 * b + g)] = -8 * (v[0] + v[1] + v[2] + v[3]);
    }
  }
  // The pair layout (see the header): half h (elements 16h..16h+15) of block 2p+j goes to slot
  // 2h+j of pair p, 16 values and 4 groups per slot.
  for (int64_t p = 0; p < n_blocks / 2; ++p) {
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 2; ++j) {
        const auto b = static_cast<size_t>(2 * p + j);
        const auto slot = static_cast<size_t>(4 * p + 2 * h + j);
        std::memcpy(&qs_pairs[16 * slot], &qs[kQK8_0 * b + 16 * static_cast<size_t>(h)], 16);
        for (int g = 0; g < 4; ++g) {
          corr_pairs[4 * slot + static_cast<size_t>(g)] = corr[8 * b + 4 * static_cast<size_t>(h) + static_cast<size_t>(g)];
          d_pairs[4 * slot + static_cast<size_t>(g)] = d[b];
        }
      }
    }
  }
}

}  // namespace ember
