#include "core/model/model_config.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ember {
namespace {

[[noreturn]] void fail(const std::string& key, const std::string& what) {
  throw std::runtime_error("model metadata '" + key + "': " + what);
}

int64_t required_int(const gguf::Metadata& md, const std::string& key, int64_t lo, int64_t hi) {
  auto v = md.get_uint(key);
  if (!v) fail(key, "missing");
  if (*v < static_cast<uint64_t>(lo) || *v > static_cast<uint64_t>(hi)) {
    fail(key, std::to_string(*v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<int64_t>(*v);
}

int64_t optional_int(const gguf::Metadata& md, const std::string& key, int64_t dflt, int64_t lo, int64_t hi) {
  if (!md.contains(key)) return dflt;
  return required_int(md, key, lo, hi);
}

}  // namespace

ModelConfig read_model_config(const gguf::Metadata& md, const ConfigLimits& limits) {
  ModelConfig c;
  auto arch = md.get_string("general.architecture");
  if (!arch) fail("general.architecture", "missing");
  c.architecture = *arch;
  // Every llama-shaped architecture Ember runs; mistral GGUFs say "llama".
  if (c.architecture != "llama" && c.architecture != "bamboo") {
    fail("general.architecture", "'" + c.architecture + "' is not supported (supported: llama, bamboo)");
  }
  c.name = md.get_string("general.name").value_or("");
  const std::string a = c.architecture + ".";

  c.n_embd = required_int(md, a + "embedding_length", 1, limits.max_embd);
  c.n_layer = required_int(md, a + "block_count", 1, limits.max_layers);
  c.n_ff = required_int(md, a + "feed_forward_length", 1, limits.max_ff);
  c.n_head = required_int(md, a + "attention.head_count", 1, limits.max_heads);
  c.n_head_kv = optional_int(md, a + "attention.head_count_kv", c.n_head, 1, limits.max_heads);
  if (c.n_head % c.n_head_kv != 0) {
    fail(a + "attention.head_count_kv", std::to_string(c.n_head_kv) + " does not divide head_count " +
                                            std::to_string(c.n_head));
  }
  if (c.n_embd % c.n_head != 0 && !md.contains(a + "attention.key_length")) {
    fail(a + "attention.head_count", std::to_string(c.n_head) + " does not divide embedding_length " +
                                         std::to_string(c.n_embd));
  }
  c.head_dim = optional_int(md, a + "attention.key_length", c.n_embd / c.n_head, 1, limits.max_embd);
  const int64_t value_length = optional_int(md, a + "attention.value_length", c.head_dim, 1, limits.max_embd);
  if (value_length != c.head_dim) fail(a + "attention.value_length", "differs from key_length (unsupported)");
  if (c.head_dim % 2 != 0) fail(a + "attention.key_length", "head dimension must be even for RoPE");
  c.n_rot = optional_int(md, a + "rope.dimension_count", c.head_dim, 2, c.head_dim);
  if (c.n_rot % 2 != 0) fail(a + "rope.dimension_count", "must be even");
  c.n_ctx_train = optional_int(md, a + "context_length", 2048, 1, int64_t{1} << 24);

  if (auto eps = md.get_float(a + "attention.layer_norm_rms_epsilon")) {
    if (!(*eps > 0.0 && *eps < 1.0)) fail(a + "attention.layer_norm_rms_epsilon", "must be in (0, 1)");
    c.rms_eps = static_cast<float>(*eps);
  }
  if (auto theta = md.get_float(a + "rope.freq_base")) {
    if (!(*theta > 1.0 && std::isfinite(*theta))) fail(a + "rope.freq_base", "must be a finite number > 1");
    c.rope_theta = static_cast<float>(*theta);
  }

  // llama.cpp's convention: no expert_count, or 0, is a dense FFN; a count of experts needs the
  // number each token uses, which cannot be 0 or more than there are.
  c.n_expert = optional_int(md, a + "expert_count", 0, 0, limits.max_experts);
  if (c.n_expert > 0) {
    c.n_expert_used = required_int(md, a + "expert_used_count", 1, c.n_expert);
  } else if (md.contains(a + "expert_used_count") && md.get_uint(a + "expert_used_count").value_or(1) != 0) {
    fail(a + "expert_used_count", "is set but " + a + "expert_count is 0 or missing");
  }

  // dReLU is what TurboSparse/Bamboo use; ReLU-gated llama variants say so in their metadata.
  c.activation = c.architecture == "bamboo" ? FfnActivation::DReLU : FfnActivation::SiLU;
  if (auto act = md.get_string(a + "ffn_activation")) {
    if (*act == "silu") c.activation = FfnActivation::SiLU;
    else if (*act == "relu") c.activation = FfnActivation::ReLU;
    else if (*act == "drelu") c.activation = FfnActivation::DReLU;
    else fail(a + "ffn_activation", "'" + *act + "' is not one of silu, relu, drelu");
  }
  if (md.contains("powerinfer.sparse_threshold")) {
    auto th = md.get_float("powerinfer.sparse_threshold");
    if (!th) fail("powerinfer.sparse_threshold", "must be a float");
    if (!std::isfinite(*th) || std::fabs(*th) > 1e30) fail("powerinfer.sparse_threshold", "must be a finite number");
    c.sparse_threshold = static_cast<float>(*th);
  }
  return c;
}

}  // namespace ember
