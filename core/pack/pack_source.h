#pragma once
// What the pack writer and the verifier both need from a source model: the bundle layout its FFN
// tensors give, and each layer's three rows per neuron as they go into a bundle.
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/model/pack_layout.h"

namespace ember::pack {

// The role a source tensor plays in a pack (every other tensor is copied unchanged).
enum class SourceRole { Copy, Gate, Up, Down, DownT, Fc2 };
SourceRole source_role(const std::string& tensor_name, int64_t n_layer, int64_t* layer);

// The bundle layout of a loaded plain model: gate and up rows in their own types, down columns as
// ffn_down_t rows (byte for byte) when the file has them, else as the F32/F16 copy the sparse path
// of a plain file uses (core/sparse/neuron_rows.h). Throws std::runtime_error when the model is
// already a pack or a role's type differs between layers (a pack has one type per role).
BundleLayout source_bundle_layout(const Model& model);

// One layer's neuron-major down rows as a pack stores them: a view of ffn_down_t, or a transposed
// copy of ffn_down built here (the whole layer: n_ff * n_embd * 2 bytes for F16).
class SourceDownRows {
 public:
  SourceDownRows(const Model& model, int64_t layer);
  const uint8_t* row(int64_t neuron) const {
    return static_cast<const uint8_t*>(view_.data) + view_.row_stride * static_cast<uint64_t>(neuron);
  }

 private:
  std::vector<uint8_t> copy_;
  MatrixView view_;
};

inline const uint8_t* matrix_row(const MatrixView& m, int64_t row) {
  return static_cast<const uint8_t*>(m.data) + m.row_stride * static_cast<uint64_t>(row);
}

}  // namespace ember::pack
