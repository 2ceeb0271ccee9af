#include "core/pack/pack_writer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <span>
#include <stdexcept>

#include "core/gguf/gguf_writer.h"
#include "core/model/model.h"
#include "core/pack/pack_source.h"

namespace ember::pack {
namespace {

constexpr int64_t kBundlesPerWrite = 256;  // a few MB of bundles per write call

struct LayerPlan {
  std::vector<int32_t> perm;  // bundle k = source neuron perm[k]
  std::vector<float> freq;    // activation frequency of bundle k
};

// One plan per unit (pack_source.h: a layer, or an expert of an MoE layer).
std::vector<LayerPlan> plan_layers(const PackOptions& o, const ModelConfig& c) {
  const int64_t n_units = unit_count(c);
  if (o.profile != nullptr) {
    check_profile_matches(*o.profile, c.n_layer, c.n_ff, c.n_expert);
    if (o.profile->activation != activation_name(c.activation)) {
      throw std::runtime_error("pack: the profile was made for a " + o.profile->activation + " FFN, this model's is " +
                               std::string(activation_name(c.activation)));
    }
  }
  if (!o.order.empty() && static_cast<int64_t>(o.order.size()) != n_units) {
    throw std::runtime_error("pack: " + std::to_string(o.order.size()) + " bundle orders for " +
                             std::to_string(n_units) + (c.is_moe() ? " experts of all layers" : " layers"));
  }
  std::vector<LayerPlan> plans(static_cast<size_t>(n_units));
  for (int64_t l = 0; l < n_units; ++l) {
    LayerPlan& p = plans[static_cast<size_t>(l)];
    if (!o.order.empty()) {
      p.perm = o.order[static_cast<size_t>(l)];
    } else if (o.profile != nullptr) {
      p.perm = o.profile->hot_order(l);
    } else {
      p.perm.resize(static_cast<size_t>(c.n_ff));
      std::iota(p.perm.begin(), p.perm.end(), 0);
    }
    if (static_cast<int64_t>(p.perm.size()) != c.n_ff) {
      throw std::runtime_error("pack: the bundle order of layer " + std::to_string(l) + " has " +
                               std::to_string(p.perm.size()) + " entries, n_ff is " + std::to_string(c.n_ff));
    }
    const std::string error = permutation_error(p.perm.data(), c.n_ff);
    if (!error.empty()) throw std::runtime_error("pack: the bundle order of layer " + std::to_string(l) + ": " + error);
    p.freq.assign(static_cast<size_t>(c.n_ff), 0.0f);
    if (o.profile != nullptr) {
      const std::vector<float>& f = o.profile->layers[static_cast<size_t>(l)].frequency;
      for (int64_t k = 0; k < c.n_ff; ++k) p.freq[static_cast<size_t>(k)] = f[static_cast<size_t>(p.perm[static_cast<size_t>(k)])];
    }
  }
  return plans;
}

void declare_tensors(gguf::GgufWriter& w, const gguf::GgufFile& src, const ModelConfig& c, const BundleLayout& b) {
  for (const gguf::TensorInfo& t : src.tensors()) {
    int64_t l = -1;
    switch (source_role(t.name, c.n_layer, &l)) {
      case SourceRole::Gate: {  // the layer's bundles take the gate's place in the file
        const auto F = static_cast<uint64_t>(c.n_ff), X = static_cast<uint64_t>(c.n_expert);
        // An MoE layer's experts are stacked along ne[2] (ne[1] for the per-neuron vectors).
        w.add_tensor(bundles_name(l), GgmlType::I8, c.is_moe() ? std::vector<uint64_t>{b.bundle_bytes, F, X}
                                                                : std::vector<uint64_t>{b.bundle_bytes, F});
        w.add_tensor(perm_name(l), GgmlType::I32, c.is_moe() ? std::vector<uint64_t>{F, X} : std::vector<uint64_t>{F});
        w.add_tensor(freq_name(l), GgmlType::F32, c.is_moe() ? std::vector<uint64_t>{F, X} : std::vector<uint64_t>{F});
        break;
      }
      case SourceRole::Up:
      case SourceRole::Down:
      case SourceRole::DownT: break;  // inside the bundles
      case SourceRole::Copy:
      case SourceRole::Fc2: w.add_tensor(t.name, t.type, std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)); break;
    }
  }
}

// The bundles of one unit, in the plan's order.
void write_unit_bundles(gguf::GgufWriter& w, const Model& model, int64_t unit, const BundleLayout& b, const LayerPlan& p) {
  const FfnUnit L = ffn_unit(model, unit);
  const SourceDownRows down(model, unit);
  const int64_t F = model.config().n_ff;
  std::vector<uint8_t> buf(static_cast<size_t>(b.bundle_bytes * static_cast<uint64_t>(std::min(F, kBundlesPerWrite))));
  for (int64_t k0 = 0; k0 < F; k0 += kBundlesPerWrite) {
    const int64_t n = std::min(kBundlesPerWrite, F - k0);
    for (int64_t j = 0; j < n; ++j) {
      const int32_t i = p.perm[static_cast<size_t>(k0 + j)];
      uint8_t* bundle = buf.data() + static_cast<uint64_t>(j) * b.bundle_bytes;
      std::memcpy(bundle, matrix_row(L.gate, i), b.gate_bytes);
      std::memcpy(bundle + b.up_offset, matrix_row(L.up, i), b.up_bytes);
      std::memcpy(bundle + b.down_offset, down.row(i), b.down_bytes);
    }
    w.write_tensor_data(buf.data(), static_cast<uint64_t>(n) * b.bundle_bytes);
  }
}

// A layer's bundles tensor, then its permutations, then its frequencies (each unit's in turn).
void write_layer_bundles(gguf::GgufWriter& w, const Model& model, int64_t layer, const BundleLayout& b,
                         const std::vector<LayerPlan>& plans) {
  const int64_t per_layer = std::max<int64_t>(1, model.config().n_expert);
  const int64_t first = layer * per_layer;
  for (int64_t u = first; u < first + per_layer; ++u) write_unit_bundles(w, model, u, b, plans[static_cast<size_t>(u)]);
  for (int64_t u = first; u < first + per_layer; ++u) {
    w.write_tensor_data(plans[static_cast<size_t>(u)].perm.data(), plans[static_cast<size_t>(u)].perm.size() * sizeof(int32_t));
  }
  for (int64_t u = first; u < first + per_layer; ++u) {
    w.write_tensor_data(plans[static_cast<size_t>(u)].freq.data(), plans[static_cast<size_t>(u)].freq.size() * sizeof(float));
  }
}

// fc2 {r, n_ff} (stacked: {r, n_ff, n_expert}, one block of n_ff rows per unit): row k of a unit's
// block in the pack = row perm[k] of the source's block, so scores index bundles.
void write_fc2(gguf::GgufWriter& w, const gguf::GgufFile& src, const gguf::TensorInfo& t,
               std::span<const LayerPlan> units) {
  const uint64_t F = units.front().perm.size();
  if (t.rows() != F * units.size()) {
    throw std::runtime_error("pack: " + t.name + " has " + std::to_string(t.rows()) + " rows, expected n_ff = " +
                             std::to_string(F) + (units.size() > 1 ? " per expert" : ""));
  }
  const io::MappedRegion m = src.map_tensor(t);
  const uint64_t rb = t.row_bytes();
  std::vector<uint8_t> buf(static_cast<size_t>(rb * 256));
  for (size_t e = 0; e < units.size(); ++e) {
    const uint8_t* block = m.data() + rb * F * e;
    const std::vector<int32_t>& perm = units[e].perm;
    for (size_t k0 = 0; k0 < F; k0 += 256) {
      const size_t n = std::min<size_t>(256, F - k0);
      for (size_t j = 0; j < n; ++j) std::memcpy(buf.data() + j * rb, block + rb * static_cast<uint64_t>(perm[k0 + j]), rb);
      w.write_tensor_data(buf.data(), rb * n);
    }
  }
}

void write_pack_file(const PackOptions& o, const Model& model, const std::vector<LayerPlan>& plans,
                     const BundleLayout& b, const std::string& path) {
  const gguf::GgufFile& src = model.file();
  const ModelConfig& c = model.config();
  gguf::GgufWriter w;
  w.set_powerinfer_magic(src.is_powerinfer());  // PowerInfer files stay PWRI: the same header rules
  for (const auto& [key, value] : src.metadata().entries()) {
    if (key != "general.alignment") w.add_value(key, value);  // the pack's own alignment is set below
  }
  w.set_alignment(kAlignment);
  w.add_u32(kVersionKey, kVersion);
  w.add_u64(kBundleBytesKey, b.bundle_bytes);
  w.add_u32(kGateTypeKey, static_cast<uint32_t>(b.gate_type));
  w.add_u32(kUpTypeKey, static_cast<uint32_t>(b.up_type));
  w.add_u32(kDownTypeKey, static_cast<uint32_t>(b.down_type));
  w.add_u64(kUpOffsetKey, b.up_offset);
  w.add_u64(kDownOffsetKey, b.down_offset);
  w.add_u64(kProfileTokensKey, o.profile != nullptr ? o.profile->tokens : 0);
  declare_tensors(w, src, c, b);

  w.begin(path);
  int64_t layers_done = 0;
  const int64_t per_layer = std::max<int64_t>(1, c.n_expert);
  for (const gguf::TensorInfo& t : src.tensors()) {
    int64_t l = -1, e = -1;
    switch (source_role(t.name, c.n_layer, &l, &e)) {
      case SourceRole::Gate:
        write_layer_bundles(w, model, l, b, plans);
        if (o.on_layer) o.on_layer(++layers_done, c.n_layer);
        break;
      case SourceRole::Up:
      case SourceRole::Down:
      case SourceRole::DownT: break;
      case SourceRole::Fc2: {
        // Stacked (or dense): the layer's units; per expert: that expert's.
        const int64_t first = l * per_layer + std::max<int64_t>(0, e);
        const int64_t count = e >= 0 || !c.is_moe() ? 1 : per_layer;
        write_fc2(w, src, t, std::span<const LayerPlan>(plans.data() + first, static_cast<size_t>(count)));
        break;
      }
      case SourceRole::Copy: {
        const io::MappedRegion m = src.map_tensor(t);
        w.write_tensor_data(m.data(), t.n_bytes);
        break;
      }
    }
  }
  w.finish();
}

}  // namespace

PackResult write_pack(const PackOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(o.output_path, ec) && fs::equivalent(o.source_path, o.output_path, ec)) {
    throw std::runtime_error("pack: the output " + o.output_path + " is the source model");
  }
  ModelLoadOptions load;
  load.repack = false;  // only the bytes are read; loading also checks every tensor the pack copies
  const std::unique_ptr<Model> model = Model::load(o.source_path, load);
  const ModelConfig& c = model->config();
  const BundleLayout b = source_bundle_layout(*model);
  const std::vector<LayerPlan> plans = plan_layers(o, c);

  const std::string tmp = o.output_path + ".tmp-" + std::to_string(::getpid());
  try {
    write_pack_file(o, *model, plans, b, tmp);
    fs::rename(tmp, o.output_path);
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
  PackResult r;
  r.n_layer = c.n_layer;
  r.n_ff = c.n_ff;
  r.n_embd = c.n_embd;
  r.n_expert = c.n_expert;
  r.layout = b;
  r.down_from_down_t = model->weights().has_down_t();
  r.file_bytes = fs::file_size(o.output_path);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace ember::pack
