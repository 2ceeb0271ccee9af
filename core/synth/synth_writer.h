#pragma once
// Writes a complete synthetic llama GGUF (v3) model: llama.cpp's metadata, a tokenizer (built-in or
// copied from another model), and deterministic weights generated and quantized on several threads
// while the file is streamed out, so multi-GB models never sit in memory.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/model/model_config.h"  // FfnActivation only (an enum: no link dependency on ember_model)
#include "core/synth/synth_shape.h"
#include "core/tensor/ggml_type.h"

namespace ember::synth {

struct SynthOptions {
  std::string preset = "tiny";
  GgmlType type = GgmlType::Q4_0;  // of the matrices; norms are always F32
  std::string output_path;
  uint64_t seed = 0;
  std::string vocab_from;          // a GGUF model whose tokenizer.* metadata is copied; empty: built-in
  int threads = 0;                 // <= 0: hardware concurrency
  // The FFN's activation. SiLU writes the classic synthetic model (byte for byte as before);
  // ReLU and dReLU write TurboSparse-like weights in which ~90% of the FFN neurons are inactive per
  // token, with a power-law activation frequency (docs/synthetic-models.md), and the metadata key
  // llama.ffn_activation ("relu" / "drelu").
  FfnActivation activation = FfnActivation::SiLU;
  // Also write PowerInfer predictor tensors blk.N.fc1/fc2.weight and the "PWRI" magic
  // (ReLU / dReLU only).
  bool predictor = false;
  int64_t predictor_rank = 0;      // rank r of the predictor; <= 0: n_embd / 8
  // F16, Q8_0 or Q4_0 (the quantized ones need a rank that is a multiple of 32). A quantized
  // predictor reads 2-3.5x fewer bytes per token; its scores carry rounding noise.
  GgmlType predictor_type = GgmlType::F16;
  // Also write blk.N.ffn_down_t.weight ({n_embd, n_ff}, one row per neuron). Sparse mixtures of
  // experts always write ffn_down_t_exps instead of ffn_down_exps, whatever this says.
  bool down_transposed = false;
  // > 0: this many layers instead of the preset's: a shallower model of the same shape, whose
  // per-layer work (and so its per-layer timing) is the full model's. Its layers draw the same
  // weights as the full model's first layers, except the residual-writing projections, which are
  // scaled for the depth.
  int64_t n_layers = 0;
};

// "silu", "relu", "drelu" (the values of llama.ffn_activation); nullopt for anything else.
std::optional<FfnActivation> parse_activation(std::string_view name);
const char* activation_key_value(FfnActivation a);

struct SynthResult {
  ModelShape shape;                // n_vocab follows the tokenizer actually written
  uint64_t n_params = 0;
  uint64_t file_bytes = 0;
  double seconds = 0.0;
};

// Matrix types synth can write: F32, F16, Q8_0, Q4_0, Q4_K.
bool is_synth_type(GgmlType type);

// ggml's general.file_type for a model whose matrices are all of `type` (Q4_K -> 14, "Q4_K_S").
uint32_t ggml_file_type(GgmlType type);

// Called after each tensor is written: (tensors done, tensors total).
using SynthProgress = std::function<void(size_t, size_t)>;

// Throws std::invalid_argument on bad options, io/gguf errors on write failure.
SynthResult write_synth_model(const SynthOptions& options, const SynthProgress& progress = {});

}  // namespace ember::synth
