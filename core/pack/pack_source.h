#pragma once
// What the pack writer and the verifier both need from a source model: the bundle layout its FFN
// tensors give, and each layer's three rows per neuron as they go into a bundle.
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/model/pack_layout.h"

namespace ember::pack {

// The role a source tensor plays in a pack (every other tensor is copied unchanged). A mixture of
// experts' names count too: stacked (blk.N.ffn_gate_exps.weight, ...) with *expert = -1, or per
// expert (blk.N.ffn_gate.E.weight, ...) with *expert = E; the layer's bundles take the place of
// its stacked gate or of expert 0's gate, the other experts' gates are Up-like (inside the bundles).
enum class SourceRole { Copy, Gate, Up, Down, DownT, Fc2 };
SourceRole source_role(const std::string& tensor_name, int64_t n_layer, int64_t* layer, int64_t* expert = nullptr);

// A pack stores a layer's FFN as units of n_ff bundles: the layer itself, or each of a mixture of
// experts' experts (unit = layer * n_expert + expert, stacked along ne[2] of the layer's tensors).
int64_t unit_count(const ModelConfig& c);
struct FfnUnit {
  int64_t layer = 0, expert = -1;       // -1: a dense layer
  MatrixView gate, up, down, down_t;    // down_t: rows == 0 when the model has none
  const int32_t* neuron_perm = nullptr; // packs only
};
FfnUnit ffn_unit(const Model& model, int64_t unit);

// The bundle layout of a loaded plain model: gate and up rows in their own types, down columns as
// ffn_down_t rows (byte for byte) when the file has them, else as the F32/F16 copy the sparse path
// of a plain file uses (core/sparse/neuron_rows.h). Throws std::runtime_error when the model is
// already a pack or a role's type differs between layers (a pack has one type per role).
BundleLayout source_bundle_layout(const Model& model);

// One unit's neuron-major down rows as a pack stores them: a view of ffn_down_t, or a transposed
// copy of ffn_down built here (the whole layer: n_ff * n_embd * 2 bytes for F16).
class SourceDownRows {
 public:
  SourceDownRows(const Model& model, int64_t unit);
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
