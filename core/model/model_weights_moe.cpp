// Binding a mixture-of-experts layer (ModelWeights, model_weights.h): the router and, for each
// part of the experts, either one stacked tensor or one tensor per expert.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/model/model_weights.h"
#include "core/model/tensor_checks.h"

namespace ember {
using namespace weights_detail;

namespace {

std::string layer_prefix(int64_t layer) { return "blk." + std::to_string(layer) + "."; }

std::string expert_name(int64_t layer, const std::string& part, int64_t expert) {
  return layer_prefix(layer) + part + "." + std::to_string(expert) + ".weight";
}

bool is_predictor_type(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::Q8_0 || t == GgmlType::Q4_0;
}

}  // namespace

void ModelWeights::bind_moe_layer(const gguf::GgufFile& file, const ModelConfig& c, int64_t i) {
  LayerWeights& l = layers[static_cast<size_t>(i)];
  l.ffn_gate_inp = bind_matrix(file, layer_prefix(i) + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
  l.experts.resize(static_cast<size_t>(c.n_expert));
  bind_expert_part(file, c, i, "ffn_gate", &ExpertWeights::gate, c.n_embd, c.n_ff, true);
  bind_expert_part(file, c, i, "ffn_up", &ExpertWeights::up, c.n_embd, c.n_ff, true);
  // Neuron rows are read whole or in block-aligned slices, never through matmul: no repacking.
  const bool repack = repack_;
  repack_ = false;
  const bool down_t = bind_expert_part(file, c, i, "ffn_down_t", &ExpertWeights::down_t, c.n_embd, c.n_ff, false);
  repack_ = repack;
  // A sparse file may hold the down projection only neuron-major (down_t), as packs do.
  if (!bind_expert_part(file, c, i, "ffn_down", &ExpertWeights::down, c.n_ff, c.n_embd, !down_t)) {
    for (ExpertWeights& ex : l.experts) ex.down = shape_only(ex.down_t.type, c.n_ff, c.n_embd);
  }
  bind_expert_predictors(file, c, i);
}

void ModelWeights::bind_moe_pack_layer(const gguf::GgufFile& file, const ModelConfig& c, int64_t i) {
  LayerWeights& l = layers[static_cast<size_t>(i)];
  l.ffn_gate_inp = bind_matrix(file, layer_prefix(i) + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
  l.experts.resize(static_cast<size_t>(c.n_expert));
  const std::vector<PackUnit> units = bind_pack_units(file, c, i, c.n_expert);
  for (int64_t e = 0; e < c.n_expert; ++e) {
    ExpertWeights& ex = l.experts[static_cast<size_t>(e)];
    const PackUnit& u = units[static_cast<size_t>(e)];
    ex.gate = u.gate;
    ex.up = u.up;
    ex.down_t = u.down_t;
    ex.neuron_perm = u.perm;
    ex.neuron_freq = u.freq;
    ex.bundles_offset = u.bundles_offset;
    ex.down = shape_only(u.down_t.type, c.n_ff, c.n_embd);  // only neuron-major, inside the bundles
  }
  bind_expert_predictors(file, c, i);
}

bool ModelWeights::bind_expert_part(const gguf::GgufFile& file, const ModelConfig& c, int64_t i, const std::string& part,
                                    MatrixView ExpertWeights::*view, int64_t ne0, int64_t ne1, bool required) {
  LayerWeights& l = layers[static_cast<size_t>(i)];
  const std::string stacked = layer_prefix(i) + part + "_exps.weight";
  int64_t per_expert = 0;
  for (int64_t e = 0; e < c.n_expert; ++e) per_expert += file.find_tensor(expert_name(i, part, e)) != nullptr;
  const bool has_stacked = file.find_tensor(stacked) != nullptr;
  if (has_stacked && per_expert > 0) {
    throw std::runtime_error("model tensor '" + stacked + "' and per-expert tensors such as '" +
                             expert_name(i, part, 0) + "' are both present: one form only");
  }
  if (!has_stacked && per_expert == 0) {
    if (required) throw std::runtime_error("model tensor '" + stacked + "' is missing (nor are there per-expert '" +
                                           expert_name(i, part, 0) + "', ...)");
    return false;
  }
  if (has_stacked) {
    const std::vector<MatrixView> views = bind_stacked(file, stacked, ne0, ne1, c.n_expert);
    for (int64_t e = 0; e < c.n_expert; ++e) l.experts[static_cast<size_t>(e)].*view = views[static_cast<size_t>(e)];
    return true;
  }
  for (int64_t e = 0; e < c.n_expert; ++e) {
    l.experts[static_cast<size_t>(e)].*view = bind_matrix(file, expert_name(i, part, e), ne0, ne1);
  }
  return true;
}

std::vector<MatrixView> ModelWeights::bind_stacked(const gguf::GgufFile& file, const std::string& name, int64_t ne0,
                                                   int64_t ne1, int64_t n_expert) {
  const gguf::TensorInfo& t = require(file, name);
  check_shape(t, ne0, ne1, n_expert);
  require_kernel_type(t);
  const uint64_t stride = row_bytes(t.type, static_cast<uint64_t>(ne0));
  const uint64_t expert_bytes = stride * static_cast<uint64_t>(ne1);  // the file holds n_expert of them
  const auto* base = static_cast<const uint8_t*>(data_of(file, t, /*may_map=*/true));
  std::vector<MatrixView> views(static_cast<size_t>(n_expert));
  for (int64_t e = 0; e < n_expert; ++e) {
    MatrixView& m = views[static_cast<size_t>(e)];
    m.type = t.type;
    m.cols = ne0;
    m.rows = ne1;
    m.row_stride = stride;
    m.data = base + static_cast<uint64_t>(e) * expert_bytes;
    repack_if_enabled(m);
  }
  settle_mapped_original(file, t, views);
  return views;
}

void ModelWeights::bind_expert_predictors(const gguf::GgufFile& file, const ModelConfig& c, int64_t i) {
  // fc1 {n_embd, r}: its row count is the rank, which fc2 {r, n_ff} must share. Stacked, one rank
  // per layer; per expert, one per expert (PowerInfer's files may differ there).
  const std::string p = layer_prefix(i);
  auto rank_of = [&](const gguf::TensorInfo& t1) {
    if (!is_predictor_type(t1.type)) {
      throw std::runtime_error("model tensor '" + t1.name + "': type " + std::string(type_name(t1.type)) +
                               " is not supported for predictors (supported: F32, F16, Q8_0, Q4_0)");
    }
    const int64_t r = t1.ne[1] <= static_cast<uint64_t>(c.n_ff) ? static_cast<int64_t>(t1.ne[1]) : 0;
    if (t1.ne[0] != static_cast<uint64_t>(c.n_embd) || r == 0) {
      throw std::runtime_error("model tensor '" + t1.name + "': shape " + shape_string(t1) + ", expected {" +
                               std::to_string(c.n_embd) + ", r, ...} with rank r in [1, n_ff = " +
                               std::to_string(c.n_ff) + "]");
    }
    return r;
  };
  auto check_fc2_type = [&](const std::string& name) {
    const gguf::TensorInfo* t2 = file.find_tensor(name);
    if (t2 != nullptr && !is_predictor_type(t2->type)) rank_of(*t2);  // the same type error, naming fc2
  };
  LayerWeights& l = layers[static_cast<size_t>(i)];
  if (const gguf::TensorInfo* t1 = file.find_tensor(p + "fc1_exps.weight")) {
    const int64_t r = rank_of(*t1);
    check_fc2_type(p + "fc2_exps.weight");
    bind_expert_part(file, c, i, "fc1", &ExpertWeights::pred_fc1, c.n_embd, r, true);
    bind_expert_part(file, c, i, "fc2", &ExpertWeights::pred_fc2, r, c.n_ff, true);
  } else {
    for (int64_t e = 0; e < c.n_expert; ++e) {
      const gguf::TensorInfo* fc1 = file.find_tensor(expert_name(i, "fc1", e));
      const gguf::TensorInfo* fc2 = file.find_tensor(expert_name(i, "fc2", e));
      if (fc1 == nullptr && fc2 == nullptr) continue;
      if (fc1 == nullptr || fc2 == nullptr) {
        throw std::runtime_error("model tensor '" + expert_name(i, fc1 ? "fc2" : "fc1", e) +
                                 "' is missing: an expert's predictor needs both fc1 and fc2");
      }
      const int64_t r = rank_of(*fc1);
      check_fc2_type(fc2->name);
      ExpertWeights& ex = l.experts[static_cast<size_t>(e)];
      ex.pred_fc1 = bind_matrix(file, fc1->name, c.n_embd, r);
      ex.pred_fc2 = bind_matrix(file, fc2->name, r, c.n_ff);
    }
    if (file.find_tensor(p + "fc2_exps.weight")) {
      throw std::runtime_error("model tensor '" + p + "fc1_exps.weight' is missing: a stacked predictor needs both "
                               "fc1_exps and fc2_exps");
    }
  }
  for (const ExpertWeights& ex : l.experts) max_predictor_rank_ = std::max(max_predictor_rank_, ex.pred_fc1.rows);
}

void ModelWeights::check_moe_sparse_tensors(const ModelConfig& c) {
  struct Optional {
    const char* what;
    MatrixView ExpertWeights::*view;
    bool* all;
  };
  const Optional parts[] = {{"fc1", &ExpertWeights::pred_fc1, &has_predictor_},
                            {"ffn_down_t", &ExpertWeights::down_t, &has_down_t_}};
  for (const Optional& o : parts) {
    int64_t present = 0, first_missing_layer = -1, first_missing_expert = -1;
    const int64_t total = c.n_layer * c.n_expert;
    for (int64_t i = 0; i < c.n_layer; ++i) {
      for (int64_t e = 0; e < c.n_expert; ++e) {
        const MatrixView& m = layers[static_cast<size_t>(i)].experts[static_cast<size_t>(e)].*o.view;
        if (m.rows > 0) {  // bound (a part never bound keeps the empty view)
          ++present;
        } else if (first_missing_layer < 0) {
          first_missing_layer = i;
          first_missing_expert = e;
        }
      }
    }
    if (present != 0 && present != total) {
      throw std::runtime_error("model tensor '" + expert_name(first_missing_layer, o.what, first_missing_expert) +
                               "' is missing: present for " + std::to_string(present) + " of " +
                               std::to_string(total) + " experts, needed for all or none");
    }
    *o.all = present == total;
  }
}

}  // namespace ember
