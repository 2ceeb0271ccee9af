#pragma once
// A loaded model: the GGUF file, its configuration, tokenizer and bound weights. Immutable after
// load and shared by every inference context that runs it.
#include <memory>
#include <string>

#include "core/gguf/gguf_file.h"
#include "core/model/model_config.h"
#include "core/model/model_weights.h"
#include "core/tokenizer/tokenizer.h"

namespace ember {

struct ModelLoadOptions {
  WeightLoad load = WeightLoad::Mmap;
  bool repack = true;  // interleaved copies of Q4_0 matrices for faster matmuls (extra memory)
};

class Model {
 public:
  // Throws with a one-line message naming the problem (file, key or tensor).
  static std::unique_ptr<Model> load(const std::string& path, const ModelLoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const ModelWeights& weights() const { return weights_; }
  const gguf::GgufFile& file() const { return file_; }

 private:
  Model(gguf::GgufFile file, ModelConfig config, Tokenizer tokenizer, const ModelLoadOptions& options);
  gguf::GgufFile file_;
  ModelConfig config_;
  Tokenizer tokenizer_;
  ModelWeights weights_;
};

}  // namespace ember
