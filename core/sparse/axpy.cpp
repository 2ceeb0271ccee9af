// The active kernel set's sparse axpy kernels (core/kernels/sparse_kernels.h), looked up once.
#include "core/sparse/axpy.h"

#include "core/kernels/sparse_kernels.h"

namespace ember {
namespace {

const SparseKernels& kernels() {
  static const SparseKernels& k = sparse_kernels();
  return k;
}

}  // namespace

void axpy(int64_t n, float a, const float* x, float* y) { kernels().axpy_f32(n, a, x, y); }

void axpy_f16(int64_t n, float a, const uint16_t* x, float* y) { kernels().axpy_f16(n, a, x, y); }

void axpy_q4_0(int64_t n_blocks, float a, const void* x, float* y) { kernels().axpy_q4_0(n_blocks, a, x, y); }

void axpy_q4_0_rows(int64_t n_blocks, const float* a, const void* const* x, int n, float* y) {
  kernels().axpy_q4_0_rows(n_blocks, a, x, n, y);
}

void axpy_q8_0(int64_t n_blocks, float a, const void* x, float* y) { kernels().axpy_q8_0(n_blocks, a, x, y); }

}  // namespace ember
