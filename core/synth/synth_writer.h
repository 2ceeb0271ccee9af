#pragma once
// Writes a complete synthetic llama GGUF (v3) model: llama.cpp's metadata, a tokenizer (built-in or
// copied from another model), and deterministic weights generated and quantized on several threads
// while the file is streamed out, so multi-GB models never sit in memory.
#include <cstdint>
#include <functional>
#include <string>

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
};

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
