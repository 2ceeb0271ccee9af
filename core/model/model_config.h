#pragma once
// The hyper-parameters of a llama-family model, read from GGUF metadata and checked for sanity
// before anything is allocated from them.
#include <cstdint>
#include <string>

#include "core/gguf/gguf_value.h"
#include "core/sparse/ffn_activation.h"  // FfnActivation, activation_name

namespace ember {

struct ModelConfig {
  std::string architecture;   // general.architecture ("llama", "bamboo", ...)
  std::string name;           // general.name, for logs
  int64_t n_embd = 0;         // residual stream width
  int64_t n_layer = 0;
  int64_t n_ff = 0;           // FFN neurons per layer
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;       // n_embd / n_head unless attention.key_length says otherwise
  int64_t n_rot = 0;          // rotary dimensions (rope.dimension_count, default head_dim)
  int64_t n_ctx_train = 0;    // context_length
  int64_t n_vocab = 0;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  FfnActivation activation = FfnActivation::SiLU;
  // PowerInfer files: a neuron is predicted active when its predictor score exceeds this
  // (metadata powerinfer.sparse_threshold, default 0). Whether predictors exist is a property of
  // the tensors: ModelWeights::has_predictor().
  float sparse_threshold = 0.0f;
  // Mixture of experts (llama.expert_count, llama.expert_used_count): each layer's FFN is
  // n_expert FFNs of n_ff neurons and a router that sends each token to n_expert_used of them.
  // 0: one dense FFN per layer.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;

  bool is_moe() const { return n_expert > 0; }
  int64_t n_embd_kv() const { return n_head_kv * head_dim; }
  int64_t n_embd_q() const { return n_head * head_dim; }
};

// Limits that keep a hostile header from asking for absurd allocations.
struct ConfigLimits {
  int64_t max_layers = 1024;
  int64_t max_embd = 1 << 16;
  int64_t max_ff = 1 << 20;
  int64_t max_heads = 1024;
  int64_t max_vocab = 1 << 21;
  int64_t max_experts = 256;
};

// Reads "<arch>.embedding_length" etc. Throws std::runtime_error naming the key on a missing or
// out-of-range value. n_vocab comes from the tokenizer arrays (checked against the tensors later).
ModelConfig read_model_config(const gguf::Metadata& md, const ConfigLimits& limits = {});

}  // namespace ember
