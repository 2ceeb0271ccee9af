#include "core/pack/pack_source.h"

#include <stdexcept>

#include "core/sparse/neuron_rows.h"

namespace ember::pack {

SourceRole source_role(const std::string& name, int64_t n_layer, int64_t* layer) {
  // "blk.<N>.<suffix>" with N in [0, n_layer) and no leading zeros (the names ModelWeights binds).
  if (name.rfind("blk.", 0) != 0) return SourceRole::Copy;
  size_t i = 4;
  int64_t n = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i < 4 + 10) n = n * 10 + (name[i++] - '0');
  if (i == 4 || i >= name.size() || name[i] != '.' || (name[4] == '0' && i > 5) || n >= n_layer) return SourceRole::Copy;
  const std::string suffix = name.substr(i + 1);
  *layer = n;
  if (suffix == "ffn_gate.weight") return SourceRole::Gate;
  if (suffix == "ffn_up.weight") return SourceRole::Up;
  if (suffix == "ffn_down.weight") return SourceRole::Down;
  if (suffix == "ffn_down_t.weight") return SourceRole::DownT;
  if (suffix == "fc2.weight") return SourceRole::Fc2;
  return SourceRole::Copy;
}

BundleLayout source_bundle_layout(const Model& model) {
  const ModelWeights& w = model.weights();
  if (w.is_pack()) throw std::runtime_error(model.file().path() + " is already a pack");
  const ModelConfig& c = model.config();
  auto down_type = [&](const LayerWeights& L) {
    return w.has_down_t() ? L.ffn_down_t.type : neuron_rows_type(L.ffn_down.type);
  };
  const LayerWeights& first = w.layers.at(0);
  for (int64_t l = 1; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const struct {
      const char* what;
      GgmlType have, want;
    } roles[] = {{"ffn_gate.weight", L.ffn_gate.type, first.ffn_gate.type},
                 {"ffn_up.weight", L.ffn_up.type, first.ffn_up.type},
                 {w.has_down_t() ? "ffn_down_t.weight" : "ffn_down.weight (as neuron rows)", down_type(L), down_type(first)}};
    for (const auto& r : roles) {
      if (r.have != r.want) {
        throw std::runtime_error("pack: blk." + std::to_string(l) + "." + r.what + " is " +
                                 std::string(type_name(r.have)) + " but blk.0's is " + std::string(type_name(r.want)) +
                                 "; a pack stores each part of a bundle in one type for all layers");
      }
    }
  }
  return compute_bundle_layout(first.ffn_gate.type, first.ffn_up.type, down_type(first), c.n_embd);
}

SourceDownRows::SourceDownRows(const Model& model, int64_t layer) {
  const ModelWeights& w = model.weights();
  const LayerWeights& L = w.layers.at(static_cast<size_t>(layer));
  if (w.has_down_t()) {
    view_ = L.ffn_down_t;
    return;
  }
  // The same function that builds the plain file's sparse-path copy, so a pack computes the same
  // floats as the plain file's sparse path.
  const GgmlType type = neuron_rows_type(L.ffn_down.type);
  copy_ = transpose_to_neuron_rows(L.ffn_down, type);
  view_ = neuron_rows_view(copy_, type, L.ffn_down.cols, L.ffn_down.rows);
}

}  // namespace ember::pack
