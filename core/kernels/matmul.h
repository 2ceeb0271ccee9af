#pragma once
// Matrix products of a weight matrix (any supported type, row-major: `rows` rows of `cols`
// elements) with float activations: y[t][r] = dot(W[r], x[t]). One token is the decode case
// (matrix-vector); many tokens the prefill case (matrix-matrix, tiled so each weight block loaded
// is reused across several tokens). Activations are converted once to the type's vec_dot_type.
#include <cstdint>
#include <vector>

#include "core/kernels/thread_pool.h"
#include "core/tensor/ggml_type.h"

namespace ember {

struct MatrixView {
  GgmlType type = GgmlType::F32;
  int64_t cols = 0;        // elements per row (ggml ne[0])
  int64_t rows = 0;        // ggml ne[1]
  const void* data = nullptr;
  uint64_t row_stride = 0; // bytes between rows (row_bytes(type, cols) for a packed tensor)
  // Optional: the same weights in the layout of repack_for_matmul() (kept alive by the owner).
  // When set, matmul reads the repacked copy for the rows it covers (faster decode and prefill).
  const void* repacked = nullptr;
};

// A copy of w's weights in the interleaved layout of the fastest kernels for this CPU (Q4_0 with
// AVX2/AVX-VNNI: panels of 8 rows; AVX-512 VNNI: panels of 16 rows; ARM neon-dotprod: panels of
// 4 rows; rows beyond the last whole panel are not included), or an empty
// vector when there is none. Done once at model load; point MatrixView::repacked at the result.
// Costs as much memory as the weights it covers; the original data must stay valid too.
std::vector<uint8_t> repack_for_matmul(const MatrixView& w);
// The same in two steps, for owners that allocate the copy themselves (the model loader puts it
// in huge-page memory): the copy's size (0: no repacked layout for w), then the copy itself into
// `out`, which holds repacked_size(w) bytes.
uint64_t repacked_size(const MatrixView& w);
void repack_for_matmul_into(const MatrixView& w, uint8_t* out);

// Buffers for converted activations, sized once for the largest product the model will run so
// that matmul never allocates in the decode loop.
class MatmulScratch {
 public:
  void reserve(int64_t max_tokens, int64_t max_cols);
  void* act_buffer(uint64_t bytes);  // grows only if reserve() was too small (never in decode)
  // Work areas for the panel kernels: repacked weight panels per thread (prefill without a
  // MatrixView::repacked copy) and per-block activation sums (reserve() sizes these for decode).
  void* panel_buffer(uint64_t bytes);
  int32_t* sums_buffer(uint64_t count);

 private:
  std::vector<uint8_t> buffer_;
  std::vector<uint8_t> panels_;
  std::vector<int32_t> sums_;
};

// PRECONDITIONS: x holds n_tokens rows of w.cols floats at x_stride floats apart; y holds
// n_tokens rows of w.rows floats at y_stride apart; w.type has kernel traits.
void matmul(const MatrixView& w, const float* x, int64_t n_tokens, int64_t x_stride, float* y,
            int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch);

// The reference: dequantize W to floats, quantize x to vec_dot_type and back, float dot products
// (single thread). Tests compare matmul() against it.
void matmul_reference(const MatrixView& w, const float* x, int64_t n_tokens, int64_t x_stride, float* y,
                      int64_t y_stride);

}  // namespace ember
