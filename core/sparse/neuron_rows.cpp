#include "core/sparse/neuron_rows.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/kernels/fp16.h"
#include "core/kernels/type_traits.h"

namespace ember {

GgmlType neuron_rows_type(GgmlType down_type) { return down_type == GgmlType::F32 ? GgmlType::F32 : GgmlType::F16; }

std::vector<uint8_t> transpose_to_neuron_rows(const MatrixView& down, GgmlType type) {
  if (type != GgmlType::F32 && type != GgmlType::F16) {
    throw std::invalid_argument("neuron rows must be F32 or F16, not " + std::string(type_name(type)));
  }
  const KernelTraits* src = kernel_traits(down.type);
  if (src == nullptr) throw std::invalid_argument("no kernels for down type " + std::string(type_name(down.type)));
  const int64_t n_embd = down.rows, n_ff = down.cols;
  const size_t elem = type == GgmlType::F32 ? 4 : 2;
  std::vector<uint8_t> out(static_cast<size_t>(n_ff) * static_cast<size_t>(n_embd) * elem);
  // Tiles of kTile output dims: their source rows (kTile * n_ff floats) are dequantized once and
  // then written out as kTile consecutive values of every neuron row.
  constexpr int64_t kTile = 32;
  std::vector<float> tile(static_cast<size_t>(kTile * n_ff));
  for (int64_t e0 = 0; e0 < n_embd; e0 += kTile) {
    const int64_t m = std::min(kTile, n_embd - e0);
    for (int64_t j = 0; j < m; ++j) {
      const auto* row = static_cast<const uint8_t*>(down.data) + down.row_stride * static_cast<uint64_t>(e0 + j);
      src->to_float(row, &tile[static_cast<size_t>(j * n_ff)], n_ff);
    }
    float column[kTile];
    for (int64_t i = 0; i < n_ff; ++i) {
      uint8_t* dst = out.data() + (static_cast<size_t>(i) * static_cast<size_t>(n_embd) + static_cast<size_t>(e0)) * elem;
      for (int64_t j = 0; j < m; ++j) column[j] = tile[static_cast<size_t>(j * n_ff + i)];
      if (type == GgmlType::F32) {
        std::memcpy(dst, column, static_cast<size_t>(m) * 4);
      } else {
        uint16_t halves[kTile];
        fp32_to_fp16_row(column, halves, m);  // F16C when available; same rounding as fp32_to_fp16
        std::memcpy(dst, halves, static_cast<size_t>(m) * 2);
      }
    }
  }
  return out;
}

MatrixView neuron_rows_view(const std::vector<uint8_t>& bytes, GgmlType type, int64_t n_ff, int64_t n_embd) {
  MatrixView m;
  m.type = type;
  m.cols = n_embd;
  m.rows = n_ff;
  m.data = bytes.data();
  m.row_stride = row_bytes(type, static_cast<uint64_t>(n_embd));
  return m;
}

}  // namespace ember
