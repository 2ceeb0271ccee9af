#pragma once
// The activation vector of the prepared-input Q4_0 dot (the sparse FFN's gate and up rows): the
// input is quantized to Q8_0 once per token (exactly as the dense path quantizes it) and laid out
// for the integer kernels, so each row's dot is a short loop with no per-row preparation.
//
// Q4_0 stores q in 0..15 and means (q - 8) * d. Instead of shifting every weight to a signed byte
// (what a single vec_dot does), the shift goes to the input side once: per 4-value group g of a
// block, sum_j (q_j - 8) x_j = sum_j q_j x_j + corr_g with corr_g = -8 * sum_j x_j. The unsigned
// weights then feed vpdpbusd (VNNI) or maddubs directly, and corr is the accumulator's start value.
#include <cstdint>
#include <vector>

#include "core/kernels/q4_0_prepared_view.h"

namespace ember {

// Sized once (reserve), refilled per token (prepare).
struct Q4PreparedInput {
  void reserve(int64_t n);              // n: a multiple of 32
  void prepare(const float* x, int64_t n);
  int64_t n_blocks = 0;
  std::vector<int8_t> qs;    // n_blocks * 32 quantized values, element order
  std::vector<float> d;      // n_blocks scales (the Q8_0 scale, F16-rounded as in block_q8_0)
  std::vector<int32_t> corr; // n_blocks * 8: -8 * (x[4g] + ... + x[4g+3]) for group g of a block
  // The same input for the AVX-512 kernel, which takes two blocks (b, b+1) per 64-byte register in
  // the order its nibble split produces: b[0..15], b+1[0..15], b[16..31], b+1[16..31]; corr in the
  // matching 4-value groups, and the block scales spread over the lanes of their groups.
  std::vector<int8_t> qs_pairs;     // (n_blocks / 2) * 64
  std::vector<int32_t> corr_pairs;  // (n_blocks / 2) * 16
  std::vector<float> d_pairs;       // (n_blocks / 2) * 16

  // The kernels' view of it (valid until the next reserve()).
  Q4PreparedView view() const {
    return {n_blocks, qs.data(), d.data(), corr.data(), qs_pairs.data(), corr_pairs.data(), d_pairs.data()};
  }
};

}  // namespace ember
