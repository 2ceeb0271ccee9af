#include "core/model/model.h"

#include <stdexcept>

namespace ember {

Model::Model(gguf::GgufFile file, ModelConfig config, Tokenizer tokenizer, const ModelLoadOptions& options)
    : file_(std::move(file)),
      config_(std::move(config)),
      tokenizer_(std::move(tokenizer)),
      weights_(file_, config_, options.load, options.repack, options.offload.budget_bytes > 0, options.checkpoint) {
  if (options.offload.budget_bytes > 0) {
    checkpoint(options);
    OffloadOptions offload = options.offload;
    if (!offload.checkpoint) offload.checkpoint = options.checkpoint;  // the hot-neuron reads
    offload_ = std::make_unique<OffloadedFfn>(file_, config_, weights_, offload);
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
