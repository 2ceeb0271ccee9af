#include "core/pack/pack_source.h"

#include <algorithm>
#include <stdexcept>

#include "core/sparse/neuron_rows.h"

namespace ember::pack {

SourceRole source_role(const std::string& name, int64_t n_layer, int64_t* layer, int64_t* expert) {
  if (expert != nullptr) *expert = -1;
  // "blk.<N>.<suffix>" with N in [0, n_layer) and no leading zeros (the names ModelWeights binds).
  if (name.rfind("blk.", 0) != 0) return SourceRole::Copy;
  size_t i = 4;
  int64_t n = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i < 4 + 10) n = n * 10 + (name[i++] - '0');
  if (i == 4 || i >= name.size() || name[i] != '.' || (name[4] == '0' && i > 5) || n >= n_layer) return SourceRole::Copy;
  const std::string suffix = name.substr(i + 1);
  *layer = n;
  // "<part>.weight", "<part>_exps.weight" or "<part>.<E>.weight".
  std::string part = suffix;
  int64_t e = -1;
  if (part.size() > 7 && part.compare(part.size() - 7, 7, ".weight") == 0) part.resize(part.size() - 7);
  else return SourceRole::Copy;
  if (part.size() > 5 && part.compare(part.size() - 5, 5, "_exps") == 0) {
    part.resize(part.size() - 5);
  } else if (const size_t dot = part.rfind('.'); dot != std::string::npos && dot + 1 < part.size()) {
    e = 0;
    for (size_t j = dot + 1; j < part.size(); ++j) {
      if (part[j] < '0' || part[j] > '9' || j > dot + 6) return SourceRole::Copy;
      e = e * 10 + (part[j] - '0');
    }
    part.resize(dot);
  }
  if (expert != nullptr) *expert = e;
  if (part == "ffn_gate") return e > 0 ? SourceRole::Up : SourceRole::Gate;
  if (part == "ffn_up") return SourceRole::Up;
  if (part == "ffn_down") return SourceRole::Down;
  if (part == "ffn_down_t") return SourceRole::DownT;
  if (part == "fc2") return SourceRole::Fc2;
  return SourceRole::Copy;
}

int64_t unit_count(const ModelConfig& c) { return c.n_layer * std::max<int64_t>(1, c.n_expert); }

FfnUnit ffn_unit(const Model& model, int64_t unit) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  FfnUnit u;
  if (!c.is_moe()) {
    const LayerWeights& L = w.layers.at(static_cast<size_t>(unit));
    u.layer = unit;
    u.gate = L.ffn_gate, u.up = L.ffn_up, u.down = L.ffn_down, u.down_t = L.ffn_down_t;
    u.neuron_perm = L.neuron_perm;
    return u;
  }
  u.layer = unit / c.n_expert;
  u.expert = unit % c.n_expert;
  const ExpertWeights& ex = w.layers.at(static_cast<size_t>(u.layer)).experts.at(static_cast<size_t>(u.expert));
  u.gate = ex.gate, u.up = ex.up, u.down = ex.down, u.down_t = ex.down_t;
  u.neuron_perm = ex.neuron_perm;
  return u;
}

BundleLayout source_bundle_layout(const Model& model) {
  const ModelWeights& w = model.weights();
  if (w.is_pack()) throw std::runtime_error(model.file().path() + " is already a pack");
  const ModelConfig& c = model.config();
  auto down_type = [&](const FfnUnit& u) { return w.has_down_t() ? u.down_t.type : neuron_rows_type(u.down.type); };
  const FfnUnit first = ffn_unit(model, 0);
  for (int64_t n = 1; n < unit_count(c); ++n) {
    const FfnUnit u = ffn_unit(model, n);
    const struct {
      const char* what;
      GgmlType have, want;
    } roles[] = {{"ffn_gate", u.gate.type, first.gate.type},
                 {"ffn_up", u.up.type, first.up.type},
                 {w.has_down_t() ? "ffn_down_t" : "ffn_down (as neuron rows)", down_type(u), down_type(first)}};
    for (const auto& r : roles) {
      if (r.have != r.want) {
        const std::string where = "blk." + std::to_string(u.layer) + (u.expert >= 0 ? " expert " + std::to_string(u.expert) : "");
        throw std::runtime_error("pack: " + where + ": " + r.what + " is " + std::string(type_name(r.have)) +
                                 " but blk.0's is " + std::string(type_name(r.want)) +
                                 "; a pack stores each part of a bundle in one type for all layers and experts");
      }
    }
  }
  return compute_bundle_layout(first.gate.type, first.up.type, down_type(first), c.n_embd);
}

SourceDownRows::SourceDownRows(const Model& model, int64_t unit) {
  const FfnUnit u = ffn_unit(model, unit);
  if (model.weights().has_down_t()) {
    view_ = u.down_t;
    return;
  }
  // The same function that builds the plain file's sparse-path copy, so a pack computes the same
  // floats as the plain file's sparse path.
  const GgmlType type = neuron_rows_type(u.down.type);
  copy_ = transpose_to_neuron_rows(u.down, type);
  view_ = neuron_rows_view(copy_, type, u.down.cols, u.down.rows);
}

}  // namespace ember::pack
