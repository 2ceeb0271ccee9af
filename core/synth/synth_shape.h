#pragma once
// The shapes of the synthetic llama models (`ember synth --preset`), and the list of tensors such a
// model has, with llama.cpp's names and ggml shapes (ne[0] = row length).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/synth/sparse_design.h"

namespace ember::synth {

struct ModelShape {
  std::string preset;
  int64_t dim = 0;          // embedding_length
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t ffn_dim = 0;      // feed_forward_length (per expert in a mixture of experts)
  int64_t n_vocab = 0;
  int64_t context_length = 0;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  // Mixture of experts (llama.cpp's MoE llama layout, as Mixtral's GGUF files): 0 experts is a
  // dense FFN; otherwise every layer has n_experts FFNs of ffn_dim neurons (SwiGLU, or sparse
  // ReLU / dReLU ones) and a router that picks n_experts_used of them per token.
  int64_t n_experts = 0;        // llama.expert_count
  int64_t n_experts_used = 0;   // llama.expert_used_count
  bool is_moe() const { return n_experts > 0; }
  int64_t head_dim() const { return dim / n_heads; }
  int64_t kv_dim() const { return head_dim() * n_kv_heads; }
};

// "tiny" (tests), "1b" (TinyLlama-1.1B shape), "mistral-7b" (Mistral-7B-v0.2 shape: rope theta 1e6,
// context 32768); mixtures of experts (8 experts, 2 used per token): "moe-tiny" (tests), "moe-mid"
// (8 layers of n_embd 1024, ~0.6 B parameters) and "mixtral-8x7b" (Mixtral-8x7B's shape, ~46.7 B).
// Throws std::invalid_argument naming the known presets.
ModelShape preset_shape(std::string_view name);
std::vector<std::string> preset_names();

// What a tensor is, which decides how its values are drawn.
// FfnDownT, PredictorFc1 and PredictorFc2 exist only in ReLU / dReLU models (sparse_design.h);
// Router (ffn_gate_inp, one row per expert) only in mixtures of experts (router_design.h), whose
// stacked expert tensors keep the roles of the dense ones.
enum class TensorRole {
  Embedding, Norm, AttnQ, AttnK, AttnV, AttnOut, FfnGate, FfnUp, FfnDown, Output,
  FfnDownT, PredictorFc1, PredictorFc2, Router
};

struct TensorSpec {
  std::string name;
  TensorRole role = TensorRole::Norm;
  int32_t layer = -1;           // -1 outside the blocks
  // One expert's slice of a stacked expert tensor (-1: the whole tensor). The sparse design draws
  // a stacked tensor expert by expert through such views (sparse_weights.cpp); model_tensors
  // leaves it at -1.
  int32_t expert = -1;
  std::vector<uint64_t> ne;     // ggml order: ne[0] is the row length
  // Rows drawn at a tenth of the scale: the output rows of byte, control and unknown tokens, so
  // that generated text is made of word pieces (and runs to its length limit instead of stopping).
  std::vector<uint8_t> quiet_rows;
  // Multiplies the role's standard deviation. The projections that write into the residual stream
  // (attn_output, ffn_down) get 1/sqrt(2 n_layers), as in GPT-2's initialisation: with full-size
  // branches every layer amplifies tiny rounding differences, and two correct engines (or even
  // llama.cpp's own repacked and plain kernels) would disagree on the greedy token after a few layers.
  float std_scale = 1.0f;
  // How the FFN is made sparse; sparse.enabled() is false for SiLU models, whose weights are
  // drawn exactly as before the sparse designs existed.
  SparseParams sparse;
  // The token embedding has slow dimensions (sparse_weights.h: slow_embedding_rows), which the
  // output head's successor bonus leaves out: set in mixtures of experts, whose routers read them
  // (router_design.h). Sparse models have them through `sparse`.
  bool slow_embedding = false;
  bool is_matrix() const { return role != TensorRole::Norm; }
  uint64_t n_elements() const;
};

// Tensors in llama.cpp's usual file order. Checks that every row length is a multiple of 256 (so
// every quantized type, Q4_K included, can store it); throws std::invalid_argument otherwise.
// Mixtures of experts have, per layer, blk.N.ffn_gate_inp {n_embd, n_experts} and the stacked
// blk.N.ffn_{gate,down,up}_exps {n_embd, n_ff, n_experts} / {n_ff, n_embd, n_experts} (expert e is
// rows [e * rows_per_expert, (e + 1) * rows_per_expert)) in place of ffn_gate / ffn_up / ffn_down.
std::vector<TensorSpec> model_tensors(const ModelShape& shape);
// With sparse.enabled(): every spec carries `sparse` (its dim/n_ff/n_layers filled in from the
// shape, predictor_rank resolved) and, per layer, ffn_down_t / fc1 / fc2 follow ffn_down when
// asked for. Sparse mixtures of experts have every expert sparse: blk.N.ffn_down_t_exps
// {n_embd, n_ff, n_experts} (row i of expert e: neuron i's down column) always, in place of
// ffn_down_exps, and with a predictor blk.N.fc1_exps {n_embd, r, n_experts} and fc2_exps
// {r, n_ff, n_experts}. Throws std::invalid_argument on a predictor rank outside [3, dim].
std::vector<TensorSpec> model_tensors(const ModelShape& shape, SparseParams sparse);

// Every expert and router counts.
uint64_t parameter_count(const ModelShape& shape);

}  // namespace ember::synth
