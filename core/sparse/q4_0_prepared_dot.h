#pragma once
// Dot products of many Q4_0 rows with one activation vector, as the sparse FFN needs them: the
// input is quantized to Q8_0 once per token (exactly as the dense path quantizes it) and laid out
// for the integer kernels, so each row's dot is a short loop with no per-row preparation.
//
// Q4_0 stores q in 0..15 and means (q - 8) * d. Instead of shifting every weight to a signed byte
// (what a single vec_dot does), the shift goes to the input side once: per 4-value group g of a
// block, sum_j (q_j - 8) x_j = sum_j q_j x_j + corr_g with corr_g = -8 * sum_j x_j. The unsigned
// weights then feed vpdpbusd (VNNI) or maddubs directly, and corr is the accumulator's start value.
#include <cstdint>
#include <vector>

namespace ember {

// The activation vector prepared for dot_q4_0_prepared(). Sized once (reserve), refilled per token.
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
};

// sum over blocks of d_w * d_x * sum_j (q_j - 8) * x_j for one Q4_0 row of n_blocks * 32 values;
// the same integers as vec_dot_q4_0_q8_0 on the same input, summed in a different float order.
float dot_q4_0_prepared(const void* row, const Q4PreparedInput& x);
float dot_q4_0_prepared_scalar(const void* row, const Q4PreparedInput& x);
// out[r] = dot_q4_0_prepared(rows[r], x) for r < n, bit for bit, computed together where the CPU
// has a multi-row kernel (AVX-512 VNNI and AVX2: up to 8 rows at once): the input is loaded once for all of
// them and their rows stream in side by side, which keeps more memory reads in flight when the
// rows lie at random addresses (the sparse FFN's gate and up rows).
// `ahead`: rows the caller will read next (at most 8, each as long as these), requested from memory
// while these stream (AVX2 kernel; the others ignore it). Never changes a result.
struct RowsAhead {
  const void* const* rows = nullptr;
  int n = 0;
};
void dot_q4_0_prepared_rows(const void* const* rows, int n, const Q4PreparedInput& x, float* out,
                            RowsAhead ahead = {});

}  // namespace ember
