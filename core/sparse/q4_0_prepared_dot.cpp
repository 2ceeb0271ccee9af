// The active kernel set's prepared-input Q4_0 dots (core/kernels/sparse_kernels.h), looked up once.
#include "core/sparse/q4_0_prepared_dot.h"

#include "core/kernels/kernel_impl.h"
#include "core/kernels/sparse_kernels.h"

namespace ember {
namespace {

const SparseKernels& kernels() {
  static const SparseKernels& k = sparse_kernels();
  return k;
}

}  // namespace

float dot_q4_0_prepared(const void* row, const Q4PreparedInput& x) {
  return kernels().dot_q4_0_prepared(row, x.view());
}

float dot_q4_0_prepared_scalar(const void* row, const Q4PreparedInput& x) {
  return generic::dot_q4_0_prepared(row, x.view());
}

void dot_q4_0_prepared_rows(const void* const* rows, int n, const Q4PreparedInput& x, float* out, RowsAhead ahead) {
  kernels().dot_q4_0_prepared_rows(rows, n, x.view(), out, ahead);
}

}  // namespace ember
