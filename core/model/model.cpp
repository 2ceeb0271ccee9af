#include "core/model/model.h"

#include <algorithm>
#include <stdexcept>

namespace ember {
namespace {

// The pack as the neuron cache sees it (core/cache/offloaded_ffn.h): numbers and views only.
OffloadedPack offloaded_pack(const gguf::GgufFile& file, const ModelConfig& c, const ModelWeights& w) {
  if (!w.is_pack() || !w.bundles_offloaded()) {
    throw std::invalid_argument("a memory budget needs a neuron-bundle pack (make one with `ember pack`)");
  }
  const pack::BundleLayout& b = w.pack_info().layout;
  OffloadedPack p;
  p.path = file.path();
  // The cache's layers are the pack's units: the layers, or each expert of each MoE layer.
  p.n_layer = c.n_layer * std::max<int64_t>(1, c.n_expert);
  p.layers_per_step = static_cast<uint32_t>(c.is_moe() ? c.n_expert_used : 1);
  p.n_embd = c.n_embd;
  p.n_ff = c.n_ff;
  p.activation = c.activation;
  p.layout = {b.gate_type, b.up_type, b.down_type, b.up_offset, b.down_offset, c.n_embd};
  p.bundle_bytes = b.bundle_bytes;
  for (const LayerWeights& L : w.layers) {
    if (!c.is_moe()) {
      p.bundles_offset.push_back(L.bundles_offset);
      p.neuron_freq.push_back(L.neuron_freq);
      p.neuron_perm.push_back(L.neuron_perm);
      continue;
    }
    for (const ExpertWeights& ex : L.experts) {
      p.bundles_offset.push_back(ex.bundles_offset);
      p.neuron_freq.push_back(ex.neuron_freq);
      p.neuron_perm.push_back(ex.neuron_perm);
    }
  }
  p.token_embd = w.token_embd;
  p.token_embd_offset = w.token_embd_offset;
  p.resident_bytes = w.memory_bytes();
  return p;
}

}  // namespace

Model::Model(gguf::GgufFile file, ModelConfig config, Tokenizer tokenizer, const ModelLoadOptions& options)
    : file_(std::move(file)),
      config_(std::move(config)),
      tokenizer_(std::move(tokenizer)),
      weights_(file_, config_, options.load, options.repack, options.offload.budget_bytes > 0, options.checkpoint) {
  if (options.offload.budget_bytes > 0) {
    checkpoint(options);
    OffloadOptions offload = options.offload;
    if (!offload.checkpoint) offload.checkpoint = options.checkpoint;  // the hot-neuron reads
    offload_ = std::make_unique<OffloadedFfn>(offloaded_pack(file_, config_, weights_), offload);
  }
}

void Model::checkpoint(const ModelLoadOptions& options) {
  if (options.checkpoint) options.checkpoint();
}

std::unique_ptr<Model> Model::load(const std::string& path, const ModelLoadOptions& options) {
  checkpoint(options);
  gguf::GgufFile file = gguf::GgufFile::open(path);
  checkpoint(options);
  ModelConfig config = read_model_config(file.metadata());
  Tokenizer tokenizer = Tokenizer::from_gguf(file.metadata());
  config.n_vocab = tokenizer.n_vocab();
  checkpoint(options);
  // The tensors must agree with the vocabulary; ModelWeights checks token_embd/output shapes.
  return std::unique_ptr<Model>(new Model(std::move(file), std::move(config), std::move(tokenizer), options));
}

}  // namespace ember
