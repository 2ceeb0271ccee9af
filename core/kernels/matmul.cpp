#include "core/kernels/matmul.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/type_traits.h"

namespace ember {
namespace {

// Prefill work unit: a block of weight rows against a block of tokens. 16 rows of a 14336-wide
// Q4_0 matrix are ~130 KB and 64 tokens of its Q8_0 activations ~1 MB: both stay in L2 while the
// 4x4 register tiles sweep them.
constexpr int64_t kRowBlock = 16;
constexpr int64_t kTokenBlock = 64;
constexpr int kTile = 4;

const KernelTraits& traits_or_throw(GgmlType type, const char* what) {
  const KernelTraits* traits = kernel_traits(type);
  if (traits == nullptr) {
    throw std::invalid_argument(std::string("matmul: no kernels for ") + what + " type " + std::string(type_name(type)));
  }
  return *traits;
}

uint64_t packed_row_bytes(const KernelTraits& traits, int64_t cols) {
  return static_cast<uint64_t>(cols / traits.block_size) * traits.type_size;
}

void check_shape(const MatrixView& w, const KernelTraits& traits) {
  if (w.cols <= 0 || w.rows < 0 || w.cols % traits.block_size != 0) {
    throw std::invalid_argument("matmul: " + std::to_string(w.cols) + " columns is not a positive multiple of " +
                                std::string(type_name(w.type)) + "'s block size " + std::to_string(traits.block_size));
  }
  if (w.row_stride < packed_row_bytes(traits, w.cols)) {
    throw std::invalid_argument("matmul: row stride " + std::to_string(w.row_stride) + " is smaller than a " +
                                std::string(type_name(w.type)) + " row of " + std::to_string(w.cols) + " columns");
  }
}

}  // namespace

void MatmulScratch::reserve(int64_t max_tokens, int64_t max_cols) {
  // The widest converted activation is F16/BF16 (2 bytes per element); Q8_0/Q8_K are narrower and
  // F32 activations are used in place.
  const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(max_tokens, 1)) *
                         static_cast<uint64_t>(2 * std::max<int64_t>(max_cols, 1) + 64);
  if (buffer_.size() < bytes) buffer_.resize(bytes);
  const uint64_t sums = static_cast<uint64_t>(std::max<int64_t>(max_tokens, 1)) *
                        static_cast<uint64_t>(std::max<int64_t>(max_cols, 1) / kQK8_0 + 1);
  if (sums_.size() < sums) sums_.resize(sums);
}

void* MatmulScratch::act_buffer(uint64_t bytes) {
  if (buffer_.size() < bytes) buffer_.resize(bytes);
  return buffer_.data();
}

void* MatmulScratch::panel_buffer(uint64_t bytes) {
  if (panels_.size() < bytes) panels_.resize(bytes);
  return panels_.data();
}

int32_t* MatmulScratch::sums_buffer(uint64_t count) {
  if (sums_.size() < count) sums_.resize(count);
  return sums_.data();
}

namespace {

// Q4_0 prefill on repacked panels (x86: 8 or 16 interleaved rows, ARM: 4; see Q4_0Panels). Each task repacks
// its row block once into the thread's panel area (unless the weights come repacked) and runs it
// against its block of tokens; rows past the last whole panel go through the 4x4 tile.
void prefill_q4_0_panels(const MatrixView& w, const Q4_0Panels& kernels, const uint8_t* acts, uint64_t act_stride,
                         int64_t n_tokens, float* y, int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch) {
  const int64_t panel_rows = kernels.rows;
  const int64_t nb = w.cols / kQK4_0;
  const auto* weights = static_cast<const uint8_t*>(w.data);
  int32_t* sums = nullptr;
  if (kernels.bias_sums != nullptr) {
    sums = scratch.sums_buffer(static_cast<uint64_t>(n_tokens * nb));
    pool.parallel_for(n_tokens, [&](int64_t t, int) { kernels.bias_sums(nb, acts + t * act_stride, 8, sums + t * nb); });
  }
  const uint64_t panel_bytes = static_cast<uint64_t>(nb) * kernels.block_bytes();
  const int64_t row_block = std::max<int64_t>(kRowBlock, panel_rows);
  const uint64_t per_thread = panel_bytes * static_cast<uint64_t>(row_block / panel_rows);
  const auto* repacked = static_cast<const uint8_t*>(w.repacked);
  auto* panels =
      repacked ? nullptr : static_cast<uint8_t*>(scratch.panel_buffer(per_thread * static_cast<uint64_t>(pool.size())));
  const GemmTileFn tile = gemm_tile_kernel(static_cast<uint32_t>(w.type));

  const int64_t n_row_blocks = (w.rows + row_block - 1) / row_block;
  const int64_t n_token_blocks = (n_tokens + kTokenBlock - 1) / kTokenBlock;
  pool.parallel_for(n_row_blocks * n_token_blocks, [&](int64_t task, int thread) {
    const int64_t row_begin = (task % n_row_blocks) * row_block;
    const int64_t row_end = std::min(w.rows, row_begin + row_block);
    const int64_t token_begin = (task / n_row_blocks) * kTokenBlock;
    const int64_t token_end = std::min(n_tokens, token_begin + kTokenBlock);
    const int64_t n_panels = (row_end - row_begin) / panel_rows;
    const uint8_t* my_panels;
    if (repacked != nullptr) {
      my_panels = repacked + static_cast<uint64_t>(row_begin / panel_rows) * panel_bytes;
    } else {
      uint8_t* buffer = panels + per_thread * static_cast<uint64_t>(thread);
      for (int64_t p = 0; p < n_panels; ++p) {
        kernels.repack(nb, weights + (row_begin + p * panel_rows) * w.row_stride, w.row_stride,
                       buffer + p * panel_bytes);
      }
      my_panels = buffer;
    }
    const int64_t rest_begin = row_begin + n_panels * panel_rows;
    for (int64_t t = token_begin; t < token_end; t += kernels.max_tokens) {
      const int n_toks = static_cast<int>(std::min<int64_t>(kernels.max_tokens, token_end - t));
      for (int64_t p = 0; p < n_panels; ++p) {
        kernels.gemm(nb, my_panels + p * panel_bytes, acts + t * act_stride, act_stride, sums ? sums + t * nb : nullptr,
                     static_cast<size_t>(nb), n_toks, y + t * y_stride + row_begin + p * panel_rows,
                     static_cast<size_t>(y_stride));
      }
    }
    for (int64_t t = token_begin; t < token_end; t += kTile) {
      const int n_toks = static_cast<int>(std::min<int64_t>(kTile, token_end - t));
      for (int64_t r = rest_begin; r < row_end; r += kTile) {
        const int n_rows = static_cast<int>(std::min<int64_t>(kTile, row_end - r));
        float out[kTile * kTile];
        tile(w.cols, weights + r * w.row_stride, w.row_stride, n_rows, acts + t * act_stride, act_stride, n_toks, out,
             kTile);
        for (int i = 0; i < n_rows; ++i) {
          for (int j = 0; j < n_toks; ++j) y[(t + j) * y_stride + r + i] = out[i * kTile + j];
        }
      }
    }
  });
}

// Decode from the repacked copy: each chunk is a run of panels; the rows past the last panel use
// the row kernels. About 8 chunks per thread, so that a thread slowed by another process does not
// hold the others up, but at least ~32 KB of weights each to amortize the hand-out.
void decode_q4_0_panels(const MatrixView& w, const Q4_0Panels& kernels, const uint8_t* act, float* y, ThreadPool& pool,
                        MatmulScratch& scratch, const KernelTraits& traits) {
  const int64_t panel_rows = kernels.rows;
  const int64_t nb = w.cols / kQK4_0;
  const uint64_t panel_bytes = static_cast<uint64_t>(nb) * kernels.block_bytes();
  int32_t* sums = nullptr;
  if (kernels.bias_sums != nullptr) {
    sums = scratch.sums_buffer(static_cast<uint64_t>(nb));
    kernels.bias_sums(nb, act, 8, sums);
  }
  const auto* repacked = static_cast<const uint8_t*>(w.repacked);
  const auto* weights = static_cast<const uint8_t*>(w.data);
  const int64_t n_panels = w.rows / panel_rows;
  const int64_t min_panels = std::clamp<int64_t>(static_cast<int64_t>((32u << 10) / panel_bytes), 1, 8);
  const int64_t panels_per_chunk = std::clamp<int64_t>(n_panels / (pool.size() * 8), min_panels, 32);
  const int64_t n_panel_chunks = (n_panels + panels_per_chunk - 1) / panels_per_chunk;
  const bool has_tail = n_panels * panel_rows < w.rows;
  const int64_t n_chunks = n_panel_chunks + (has_tail ? 1 : 0);
  const GemvRowsFn gemv = gemv_rows_kernel(static_cast<uint32_t>(w.type));
  pool.parallel_for(n_chunks, [&](int64_t chunk, int) {
    if (chunk == n_panel_chunks) {
      for (int64_t r = n_panels * panel_rows; r < w.rows; ++r) {
        if (gemv != nullptr) {
          gemv(w.cols, weights + r * w.row_stride, w.row_stride, 1, act, y + r);
        } else {
          y[r] = traits.vec_dot(w.cols, weights + r * w.row_stride, act);
        }
      }
      return;
    }
    const int64_t end = std::min(n_panels, (chunk + 1) * panels_per_chunk);
    for (int64_t p = chunk * panels_per_chunk; p < end; ++p) {
      kernels.gemm(nb, repacked + p * panel_bytes, act, 0, sums, 0, 1, y + p * panel_rows, 0);
    }
  });
}

}  // namespace

uint64_t repacked_size(const MatrixView& w) {
  const Q4_0Panels* kernels = q4_0_panels();
  if (w.type != GgmlType::Q4_0 || kernels == nullptr || w.cols % kQK4_0 != 0 || w.rows < kernels->rows) return 0;
  const uint64_t panel_bytes = static_cast<uint64_t>(w.cols / kQK4_0) * kernels->block_bytes();
  return panel_bytes * static_cast<uint64_t>(w.rows / kernels->rows);
}

void repack_for_matmul_into(const MatrixView& w, uint8_t* out) {
  if (repacked_size(w) == 0) return;
  const Q4_0Panels* kernels = q4_0_panels();
  const int64_t nb = w.cols / kQK4_0;
  const uint64_t panel_bytes = static_cast<uint64_t>(nb) * kernels->block_bytes();
  const int64_t n_panels = w.rows / kernels->rows;
  const auto* weights = static_cast<const uint8_t*>(w.data);
  for (int64_t p = 0; p < n_panels; ++p) {
    kernels->repack(nb, weights + p * kernels->rows * w.row_stride, w.row_stride, out + p * panel_bytes);
  }
}

std::vector<uint8_t> repack_for_matmul(const MatrixView& w) {
  std::vector<uint8_t> out(repacked_size(w));
  if (!out.empty()) repack_for_matmul_into(w, out.data());
  return out;
}

void matmul(const MatrixView& w, const float* x, int64_t n_tokens, int64_t x_stride, float* y, int64_t y_stride,
            ThreadPool& pool, MatmulScratch& scratch) {
  const KernelTraits& traits = traits_or_throw(w.type, "weight");
  check_shape(w, traits);
  if (n_tokens <= 0 || w.rows == 0) return;
  const KernelTraits& act_traits = traits_or_throw(traits.vec_dot_type, "activation");
  const int64_t cols = w.cols;
  const auto* weights = static_cast<const uint8_t*>(w.data);

  // Activations converted once to what the weight type's dot product consumes.
  const uint8_t* acts;
  uint64_t act_stride;
  if (traits.vec_dot_type == GgmlType::F32) {
    acts = reinterpret_cast<const uint8_t*>(x);
    act_stride = static_cast<uint64_t>(x_stride) * sizeof(float);
  } else {
    act_stride = packed_row_bytes(act_traits, cols);
    auto* buffer = static_cast<uint8_t*>(scratch.act_buffer(act_stride * static_cast<uint64_t>(n_tokens)));
    auto convert = [&](int64_t t, int) { act_traits.from_float(x + t * x_stride, buffer + t * act_stride, cols); };
    if (n_tokens == 1) {
      convert(0, 0);
    } else {
      pool.parallel_for(n_tokens, convert);
    }
    acts = buffer;
  }

  const Q4_0Panels* q4_0_kernels = w.type == GgmlType::Q4_0 ? q4_0_panels() : nullptr;
  if (n_tokens == 1 && w.repacked != nullptr && q4_0_kernels != nullptr) {
    decode_q4_0_panels(w, *q4_0_kernels, acts, y, pool, scratch, traits);
    return;
  }

  if (n_tokens == 1) {
    // Decode: a matrix-vector product, bound by streaming the weights. Enough chunks per thread
    // that a thread slowed by another process does not hold the others up.
    const int64_t rows_per_chunk = std::clamp<int64_t>(w.rows / (pool.size() * 8), 16, 256);
    const int64_t n_chunks = (w.rows + rows_per_chunk - 1) / rows_per_chunk;
    const GemvRowsFn gemv = gemv_rows_kernel(static_cast<uint32_t>(w.type));
    pool.parallel_for(n_chunks, [&](int64_t chunk, int) {
      const int64_t begin = chunk * rows_per_chunk;
      const int64_t end = std::min(w.rows, begin + rows_per_chunk);
      if (gemv != nullptr) {
        gemv(cols, weights + begin * w.row_stride, w.row_stride, static_cast<int>(end - begin), acts, y + begin);
        return;
      }
      for (int64_t r = begin; r < end; ++r) y[r] = traits.vec_dot(cols, weights + r * w.row_stride, acts);
    });
    return;
  }

  if (q4_0_kernels != nullptr) {
    prefill_q4_0_panels(w, *q4_0_kernels, acts, act_stride, n_tokens, y, y_stride, pool, scratch);
    return;
  }

  // Prefill: blocks of rows x tokens, each swept by register tiles.
  const GemmTileFn tile = gemm_tile_kernel(static_cast<uint32_t>(w.type));
  const int64_t n_row_blocks = (w.rows + kRowBlock - 1) / kRowBlock;
  const int64_t n_token_blocks = (n_tokens + kTokenBlock - 1) / kTokenBlock;
  pool.parallel_for(n_row_blocks * n_token_blocks, [&](int64_t task, int) {
    const int64_t row_begin = (task % n_row_blocks) * kRowBlock;
    const int64_t row_end = std::min(w.rows, row_begin + kRowBlock);
    const int64_t token_begin = (task / n_row_blocks) * kTokenBlock;
    const int64_t token_end = std::min(n_tokens, token_begin + kTokenBlock);
    for (int64_t r = row_begin; r < row_end; r += kTile) {
      const int n_rows = static_cast<int>(std::min<int64_t>(kTile, row_end - r));
      for (int64_t t = token_begin; t < token_end; t += kTile) {
        const int n_toks = static_cast<int>(std::min<int64_t>(kTile, token_end - t));
        if (tile != nullptr) {
          float out[kTile * kTile];
          tile(cols, weights + r * w.row_stride, w.row_stride, n_rows, acts + t * act_stride, act_stride, n_toks, out,
               kTile);
          for (int i = 0; i < n_rows; ++i) {
            for (int j = 0; j < n_toks; ++j) y[(t + j) * y_stride + r + i] = out[i * kTile + j];
          }
        } else {
          for (int i = 0; i < n_rows; ++i) {
            for (int j = 0; j < n_toks; ++j) {
              y[(t + j) * y_stride + r + i] =
                  traits.vec_dot(cols, weights + (r + i) * w.row_stride, acts + (t + j) * act_stride);
            }
          }
        }
      }
    }
  });
}

void matmul_reference(const MatrixView& w, const float* x, int64_t n_tokens, int64_t x_stride, float* y,
                      int64_t y_stride) {
  const KernelTraits* scalar = scalar_kernel_traits(w.type);
  if (scalar == nullptr) throw std::invalid_argument("matmul_reference: no kernels for type " + std::string(type_name(w.type)));
  check_shape(w, *scalar);
  // The activations go through the same quantizer matmul() uses, so the only differences left
  // are in the order of the float sums.
  const KernelTraits& act_traits = traits_or_throw(scalar->vec_dot_type, "activation");
  const int64_t cols = w.cols;
  std::vector<float> w_row(cols), x_row(cols);
  std::vector<uint8_t> x_converted(packed_row_bytes(act_traits, cols));
  std::vector<float> x_all(static_cast<size_t>(cols * n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) {
    act_traits.from_float(x + t * x_stride, x_converted.data(), cols);
    act_traits.to_float(x_converted.data(), x_all.data() + t * cols, cols);
  }
  for (int64_t r = 0; r < w.rows; ++r) {
    scalar->to_float(static_cast<const uint8_t*>(w.data) + r * w.row_stride, w_row.data(), cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += static_cast<double>(w_row[c]) * x_all[t * cols + c];
      y[t * y_stride + r] = static_cast<float>(sum);
    }
  }
}

}  // namespace ember
