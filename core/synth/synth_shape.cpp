#include "core/synth/synth_shape.h"

#include <cmath>

#include <stdexcept>

namespace ember::synth {

ModelShape preset_shape(std::string_view name) {
  ModelShape s;
  s.preset = std::string(name);
  if (name == "tiny") {
    s.dim = 256, s.n_layers = 2, s.n_heads = 4, s.n_kv_heads = 2, s.ffn_dim = 768, s.n_vocab = 1024;
    s.context_length = 2048;
  } else if (name == "1b") {
    s.dim = 2048, s.n_layers = 22, s.n_heads = 32, s.n_kv_heads = 4, s.ffn_dim = 5632, s.n_vocab = 32000;
    s.context_length = 2048;
  } else if (name == "mistral-7b") {
    s.dim = 4096, s.n_layers = 32, s.n_heads = 32, s.n_kv_heads = 8, s.ffn_dim = 14336, s.n_vocab = 32000;
    s.context_length = 32768;
    s.rope_theta = 1000000.0f;
  } else if (name == "moe-tiny") {
    s.dim = 256, s.n_layers = 2, s.n_heads = 4, s.n_kv_heads = 2, s.ffn_dim = 512, s.n_vocab = 1024;
    s.context_length = 2048;
    s.n_experts = 8, s.n_experts_used = 2;
  } else if (name == "moe-mid") {
    s.dim = 1024, s.n_layers = 8, s.n_heads = 16, s.n_kv_heads = 4, s.ffn_dim = 2816, s.n_vocab = 32000;
    s.context_length = 4096;
    s.n_experts = 8, s.n_experts_used = 2;
  } else if (name == "mixtral-8x7b") {
    s.dim = 4096, s.n_layers = 32, s.n_heads = 32, s.n_kv_heads = 8, s.ffn_dim = 14336, s.n_vocab = 32000;
    s.context_length = 32768;
    s.rope_theta = 1000000.0f;
    s.n_experts = 8, s.n_experts_used = 2;
  } else {
    std::string known;
    for (const auto& p : preset_names()) known += (known.empty() ? "" : ", ") + p;
    throw std::invalid_argument("synth: unknown preset '" + std::string(name) + "' (known: " + known + ")");
  }
  return s;
}

std::vector<std::string> preset_names() { return {"tiny", "1b", "mistral-7b", "moe-tiny", "moe-mid", "mixtral-8x7b"}; }

uint64_t TensorSpec::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  return n;
}

std::vector<TensorSpec> model_tensors(const ModelShape& s) { return model_tensors(s, SparseParams{}); }

std::vector<TensorSpec> model_tensors(const ModelShape& s, SparseParams sparse) {
  if (s.dim <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 || s.n_layers <= 0 || s.ffn_dim <= 0 || s.n_vocab <= 0)
    throw std::invalid_argument("synth: model shape has a non-positive dimension");
  if (s.dim % s.n_heads != 0 || s.n_heads % s.n_kv_heads != 0)
    throw std::invalid_argument("synth: dim must divide by n_heads and n_heads by n_kv_heads");
  if (s.dim % 256 != 0 || s.ffn_dim % 256 != 0)
    throw std::invalid_argument("synth: dim and ffn_dim must be multiples of 256 (the Q4_K block)");
  if (s.n_experts < 0 || (s.is_moe() && (s.n_experts_used < 1 || s.n_experts_used > s.n_experts)))
    throw std::invalid_argument("synth: a mixture of experts needs 1 <= n_experts_used <= n_experts");
  const auto dim = static_cast<uint64_t>(s.dim), kv = static_cast<uint64_t>(s.kv_dim()),
             ffn = static_cast<uint64_t>(s.ffn_dim), vocab = static_cast<uint64_t>(s.n_vocab),
             n_exp = static_cast<uint64_t>(s.n_experts);
  if (sparse.enabled()) {
    sparse.dim = s.dim, sparse.n_ff = s.ffn_dim, sparse.n_layers = s.n_layers;
    if (sparse.predictor_rank <= 0) sparse.predictor_rank = default_predictor_rank(s.dim);
    // 3: one low-rank direction (two fc1 rows) and the constant row (predictor_directions).
    if (sparse.predictor_rank < 3 || sparse.predictor_rank > s.dim)
      throw std::invalid_argument("synth: predictor rank " + std::to_string(sparse.predictor_rank) +
                                  " is outside [3, n_embd = " + std::to_string(s.dim) + "]");
  } else {
    sparse = SparseParams{};
  }
  std::vector<TensorSpec> t;
  const float residual_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(s.n_layers));
  auto add = [&t, residual_scale, &sparse, &s](std::string name, TensorRole role, int32_t layer,
                                               std::vector<uint64_t> ne) {
    TensorSpec spec;
    spec.slow_embedding = s.is_moe();
    if (role == TensorRole::AttnOut || role == TensorRole::FfnDown || role == TensorRole::FfnDownT)
      spec.std_scale = residual_scale;
    spec.sparse = sparse;
    spec.name = std::move(name);
    spec.role = role;
    spec.layer = layer;
    spec.ne = std::move(ne);
    t.push_back(std::move(spec));
  };
  add("token_embd.weight", TensorRole::Embedding, -1, {dim, vocab});
  for (int32_t l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", TensorRole::Norm, l, {dim});
    add(p + "attn_q.weight", TensorRole::AttnQ, l, {dim, dim});
    add(p + "attn_k.weight", TensorRole::AttnK, l, {dim, kv});
    add(p + "attn_v.weight", TensorRole::AttnV, l, {dim, kv});
    add(p + "attn_output.weight", TensorRole::AttnOut, l, {dim, dim});
    add(p + "ffn_norm.weight", TensorRole::Norm, l, {dim});
    if (s.is_moe()) {  // the order of llama.cpp's convert_hf_to_gguf.py for Mixtral
      add(p + "ffn_gate_inp.weight", TensorRole::Router, l, {dim, n_exp});
      add(p + "ffn_gate_exps.weight", TensorRole::FfnGate, l, {dim, ffn, n_exp});
      // Sparse experts keep only the neuron-major down projection: the sparse FFN reads a row per
      // active neuron, and a 47 B file should not hold the down matrices twice.
      if (sparse.enabled())
        add(p + "ffn_down_t_exps.weight", TensorRole::FfnDownT, l, {dim, ffn, n_exp});
      else
        add(p + "ffn_down_exps.weight", TensorRole::FfnDown, l, {ffn, dim, n_exp});
      add(p + "ffn_up_exps.weight", TensorRole::FfnUp, l, {dim, ffn, n_exp});
      if (sparse.enabled() && sparse.predictor) {
        const auto rank = static_cast<uint64_t>(sparse.predictor_rank);
        add(p + "fc1_exps.weight", TensorRole::PredictorFc1, l, {dim, rank, n_exp});
        add(p + "fc2_exps.weight", TensorRole::PredictorFc2, l, {rank, ffn, n_exp});
      }
      continue;
    }
    add(p + "ffn_gate.weight", TensorRole::FfnGate, l, {dim, ffn});
    add(p + "ffn_up.weight", TensorRole::FfnUp, l, {dim, ffn});
    add(p + "ffn_down.weight", TensorRole::FfnDown, l, {ffn, dim});
    if (sparse.enabled() && sparse.down_transposed) add(p + "ffn_down_t.weight", TensorRole::FfnDownT, l, {dim, ffn});
    if (sparse.enabled() && sparse.predictor) {
      const auto rank = static_cast<uint64_t>(sparse.predictor_rank);
      add(p + "fc1.weight", TensorRole::PredictorFc1, l, {dim, rank});
      add(p + "fc2.weight", TensorRole::PredictorFc2, l, {rank, ffn});
    }
  }
  add("output_norm.weight", TensorRole::Norm, -1, {dim});
  add("output.weight", TensorRole::Output, -1, {dim, vocab});
  return t;
}

uint64_t parameter_count(const ModelShape& shape) {
  uint64_t n = 0;
  for (const auto& t : model_tensors(shape)) n += t.n_elements();
  return n;
}

}  // namespace ember::synth
