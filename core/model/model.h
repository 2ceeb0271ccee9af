#pragma once
// A loaded model: the GGUF file, its configuration, tokenizer and bound weights. Immutable after
// load and shared by every inference context that runs it.
#include <memory>
#include <stdexcept>
#include <string>

#include "core/gguf/gguf_file.h"
#include "core/model/model_config.h"
#include "core/model/model_weights.h"
#include "core/cache/offloaded_ffn.h"
#include "core/tokenizer/tokenizer.h"

namespace ember {

struct ModelLoadOptions {
  WeightLoad load = WeightLoad::Mmap;
  bool repack = true;  // interleaved copies of Q4_0 matrices for faster matmuls (extra memory)
  // A memory budget (offload.budget_bytes > 0, packs only): the FFN bundles stay on storage and go
  // through the neuron cache (offloaded_ffn.h); everything else is mapped and stays resident.
  OffloadOptions offload;
  // Runs between the load's stages, before each tensor is bound and between the hot-neuron reads
  // (model_weights.h); throw (e.g. LoadCancelled) to abandon the load. Loading a big model takes
  // long enough that a daemon told to stop must not have to wait for it to end.
  LoadCheckpoint checkpoint;
};

// What a checkpoint throws to abandon a load on request (a signal): not an error of the model.
class LoadCancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Model {
 public:
  // Throws with a one-line message naming the problem (file, key or tensor).
  static std::unique_ptr<Model> load(const std::string& path, const ModelLoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const ModelWeights& weights() const { return weights_; }
  const gguf::GgufFile& file() const { return file_; }
  // The neuron cache when the model runs under a memory budget, else null. Shared by every context
  // of the model (it serialises their FFN steps itself).
  OffloadedFfn* offloaded_ffn() const { return offload_.get(); }

 private:
  Model(gguf::GgufFile file, ModelConfig config, Tokenizer tokenizer, const ModelLoadOptions& options);
  static void checkpoint(const ModelLoadOptions& options);  // options.checkpoint, when set
  gguf::GgufFile file_;
  ModelConfig config_;
  Tokenizer tokenizer_;
  ModelWeights weights_;
  std::unique_ptr<OffloadedFfn> offload_;
};

}  // namespace ember
