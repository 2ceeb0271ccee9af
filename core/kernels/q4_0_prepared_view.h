#pragma once
// What the prepared-input Q4_0 dot kernels read: plain pointers into a Q4PreparedInput
// (q4_0_prepared_input.h has the layout). The SIMD kernel files are built with -mavx2 / -mavx512*,
// and any inline function they instantiate (std::vector's, say) could be the copy the linker
// keeps for the whole program, so they see this struct, never the vectors.
#include <cstdint>

namespace ember {

struct Q4PreparedView {
  int64_t n_blocks = 0;
  const int8_t* qs = nullptr;          // n_blocks * 32 values, element order
  const float* d = nullptr;            // n_blocks scales
  const int32_t* corr = nullptr;       // n_blocks * 8 offset corrections
  const int8_t* qs_pairs = nullptr;    // the AVX-512 pair layout of qs
  const int32_t* corr_pairs = nullptr;
  const float* d_pairs = nullptr;
};

// Rows a caller will read next (at most 8, each as long as the rows being computed), requested
// from memory while those stream. Never changes a result; kernels may ignore it.
struct RowsAhead {
  const void* const* rows = nullptr;
  int n = 0;
};

}  // namespace ember
