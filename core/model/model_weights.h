#pragma once
// The weights of a llama-family model, bound by name from a GGUF file with their type and shape
// checked (expected vs actual in the error), kept either memory-mapped or read into aligned
// memory. Shapes are given as ggml's {ne0 (row length), ne1 (rows)}.
#include <cstdint>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/kernels/matmul.h"
#include "core/model/model_config.h"
#include "io/file.h"

namespace ember {

enum class WeightLoad { Mmap, Read };

struct LayerWeights {
  const float* attn_norm = nullptr;  // (n_embd)
  MatrixView wq;                     // (n_embd -> n_head * head_dim)
  MatrixView wk;                     // (n_embd -> n_head_kv * head_dim)
  MatrixView wv;                     // (n_embd -> n_head_kv * head_dim)
  MatrixView wo;                     // (n_head * head_dim -> n_embd)
  const float* ffn_norm = nullptr;   // (n_embd)
  MatrixView ffn_gate;               // (n_embd -> n_ff)
  MatrixView ffn_up;                 // (n_embd -> n_ff)
  MatrixView ffn_down;               // (n_ff -> n_embd)
};

class ModelWeights {
 public:
  // Binds every tensor the config needs. Throws std::runtime_error naming the tensor on a missing
  // tensor, a wrong shape (expected vs actual) or a type the kernels cannot compute with.
  // repack: also keep a copy of each matrix in the kernels' interleaved layout where one exists
  // (Q4_0), which roughly doubles decode speed at the cost of that much extra memory, as
  // llama.cpp's CPU weight repacking does.
  ModelWeights(const gguf::GgufFile& file, const ModelConfig& config, WeightLoad load, bool repack);

  MatrixView token_embd;              // (n_embd, n_vocab): row t is token t's embedding
  const float* output_norm = nullptr; // (n_embd)
  MatrixView output;                  // (n_embd -> n_vocab); the embedding when output.weight is absent
  std::vector<LayerWeights> layers;

  uint64_t resident_bytes() const { return resident_bytes_; }
  uint64_t repacked_bytes() const { return repacked_bytes_; }

 private:
  MatrixView bind_matrix(const gguf::GgufFile& file, const std::string& name, int64_t ne0, int64_t ne1);
  const float* bind_vector(const gguf::GgufFile& file, const std::string& name, int64_t n);
  const void* data_of(const gguf::GgufFile& file, const gguf::TensorInfo& t);

  WeightLoad load_;
  std::vector<io::MappedRegion> maps_;
  std::vector<io::AlignedBuffer> buffers_;
  std::vector<std::vector<uint8_t>> repacked_;
  bool repack_ = false;
  uint64_t resident_bytes_ = 0;
  uint64_t repacked_bytes_ = 0;
};

}  // namespace ember
