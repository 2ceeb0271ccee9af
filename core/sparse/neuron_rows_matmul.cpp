#include "core/sparse/neuron_rows_matmul.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/kernels/kernel_impl.h"
#include "core/kernels/type_traits.h"
#include "core/sparse/axpy.h"

namespace ember {
namespace {

// A strip of at most kMaxStrip outputs (a multiple of every block size, 256 being the largest)
// keeps the dequantized slice on the stack (4 KiB) and a token block's outputs (16 x 4 KiB) in L2.
constexpr int64_t kMaxStrip = 1024;
constexpr int64_t kMinStrip = 64;
constexpr int64_t kTokenBlock = 16;
constexpr int64_t kPrefetchAhead = 4;  // used rows whose slices are in flight

const uint8_t* row_of(const MatrixView& m, int64_t i) {
  return static_cast<const uint8_t*>(m.data) + m.row_stride * static_cast<uint64_t>(i);
}

// The outputs split among the threads (decode: one strip per thread when they fit), block-aligned.
int64_t strip_length(int64_t n_embd, int n_threads, uint32_t block) {
  const int64_t per_thread = (n_embd + n_threads - 1) / n_threads;
  int64_t len = std::clamp<int64_t>(per_thread, kMinStrip, kMaxStrip);
  len = (len + block - 1) / block * block;
  return std::min<int64_t>(len, std::max<int64_t>(kMaxStrip / block, 1) * block);
}

}  // namespace

void neuron_rows_matmul(const MatrixView& rows, const float* h, int64_t n_tokens, int64_t h_stride, float* out,
                        int64_t out_stride, ThreadPool& pool, bool accumulate) {
  const KernelTraits* traits = kernel_traits(rows.type);
  if (traits == nullptr) {
    throw std::invalid_argument("neuron_rows_matmul: no kernels for type " + std::string(type_name(rows.type)));
  }
  const KernelTraits& dt = *traits;
  const int64_t E = rows.cols, F = rows.rows;
  if (n_tokens <= 0 || E <= 0) return;
  const int64_t strip = strip_length(E, pool.size(), dt.block_size);
  const int64_t n_strips = (E + strip - 1) / strip;
  const int64_t n_blocks = (n_tokens + kTokenBlock - 1) / kTokenBlock;
  const GgmlType type = rows.type;
  pool.parallel_for(n_strips * n_blocks, [&](int64_t tile, int) {
    const int64_t e0 = (tile % n_strips) * strip, len = std::min(strip, E - e0);
    const int64_t t0 = (tile / n_strips) * kTokenBlock, t1 = std::min(n_tokens, t0 + kTokenBlock);
    if (!accumulate) {
      for (int64_t t = t0; t < t1; ++t) std::memset(out + t * out_stride + e0, 0, static_cast<size_t>(len) * sizeof(float));
    }
    alignas(64) float slice[kMaxStrip];
    const uint64_t offset = static_cast<uint64_t>(e0 / dt.block_size) * dt.type_size;
    const uint64_t slice_bytes = static_cast<uint64_t>(len / dt.block_size) * dt.type_size;
    auto used = [&](int64_t i) {
      for (int64_t t = t0; t < t1; ++t)
        if (h[t * h_stride + i] != 0.0f) return true;
      return false;
    };
    // The slices of the used rows lie a bundle apart: too far for the hardware prefetcher, so the
    // slice kPrefetchAhead used rows ahead is requested while this one is summed.
    int64_t ahead = 0, n_ahead = 0;
    auto advance_prefetch = [&](int64_t until) {
      while (ahead < F && n_ahead < until) {
        if (used(ahead)) {
          const uint8_t* p = row_of(rows, ahead) + offset;
          for (uint64_t b = 0; b < slice_bytes; b += 64) __builtin_prefetch(p + b);
          ++n_ahead;
        }
        ++ahead;
      }
    };
    advance_prefetch(kPrefetchAhead);
    for (int64_t i = 0; i < F; ++i) {
      if (!used(i)) continue;
      --n_ahead;
      advance_prefetch(kPrefetchAhead);
      const uint8_t* row = row_of(rows, i) + offset;
      const float* src = reinterpret_cast<const float*>(row);
      if (type != GgmlType::F32 && type != GgmlType::F16) {
        dt.to_float(row, slice, len);  // len is a whole number of blocks (E and e0 are)
        src = slice;
      }
      for (int64_t t = t0; t < t1; ++t) {
        const float a = h[t * h_stride + i];
        if (a == 0.0f) continue;
        float* y = out + t * out_stride + e0;
        if (type == GgmlType::F16) {
          axpy_f16(len, a, reinterpret_cast<const uint16_t*>(row), y);
        } else {
          axpy(len, a, src, y);
        }
      }
    }
  });
}

void neuron_rows_matmul_reference(const MatrixView& rows, const float* h, int64_t n_tokens, int64_t h_stride,
                                  float* out, int64_t out_stride) {
  const KernelTraits& dt = *scalar_kernel_traits(rows.type);
  const int64_t E = rows.cols, F = rows.rows;
  std::vector<float> row(static_cast<size_t>(E));
  for (int64_t t = 0; t < n_tokens; ++t) std::fill(out + t * out_stride, out + t * out_stride + E, 0.0f);
  for (int64_t i = 0; i < F; ++i) {
    dt.to_float(row_of(rows, i), row.data(), E);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float a = h[t * h_stride + i];
      if (a == 0.0f) continue;
      // The scalar axpy rounds each product before the add: a plain y += a * x here would be fused
      // into one fma wherever the target has one (aarch64's base ISA), a different float.
      generic::axpy_f32(E, a, row.data(), out + t * out_stride);
    }
  }
}

}  // namespace ember
