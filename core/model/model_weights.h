#pragma once
// The weights of a llama-family model, bound by name from a GGUF file with their type and shape
// checked (expected vs actual in the error), kept either memory-mapped or read into aligned
// memory. Shapes are given as ggml's {ne0 (row length), ne1 (rows)}.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/kernels/matmul.h"
#include "core/model/model_config.h"
#include "core/model/pack_layout.h"
#include "io/file.h"

namespace ember {

enum class WeightLoad { Mmap, Read };

// One expert of a mixture-of-experts layer: a SwiGLU-shaped FFN of n_ff neurons, with what the
// sparse FFN needs when the file has it (as for a dense layer, see LayerWeights).
struct ExpertWeights {
  MatrixView gate;      // (n_embd -> n_ff)
  MatrixView up;        // (n_embd -> n_ff)
  MatrixView down;      // (n_ff -> n_embd); data == nullptr when the file has only down_t
  MatrixView down_t;    // {n_embd, n_ff}: row i = neuron i's down column; optional
  MatrixView pred_fc1;  // (n_embd -> r); optional: PowerInfer's predictor of this expert
  MatrixView pred_fc2;  // (r -> n_ff)
  // Packs only, as LayerWeights' (the expert's bundles in blk.N.ffn_bundles along ne[2]).
  const int32_t* neuron_perm = nullptr;
  const float* neuron_freq = nullptr;
  uint64_t bundles_offset = 0;
};

struct LayerWeights {
  const float* attn_norm = nullptr;  // (n_embd)
  MatrixView wq;                     // (n_embd -> n_head * head_dim)
  MatrixView wk;                     // (n_embd -> n_head_kv * head_dim)
  MatrixView wv;                     // (n_embd -> n_head_kv * head_dim)
  MatrixView wo;                     // (n_head * head_dim -> n_embd)
  const float* ffn_norm = nullptr;   // (n_embd)
  MatrixView ffn_gate;               // (n_embd -> n_ff); in a pack: rows inside the bundles
  MatrixView ffn_up;                 // (n_embd -> n_ff); in a pack: rows inside the bundles
  MatrixView ffn_down;               // (n_ff -> n_embd); in a pack: data == nullptr (see ffn_down_t)
  // Optional (PowerInfer files; data == nullptr when absent, and then absent in every layer):
  MatrixView pred_fc1;               // blk.N.fc1.weight (n_embd -> r), r may differ per layer
  MatrixView pred_fc2;               // blk.N.fc2.weight (r -> n_ff)
  MatrixView ffn_down_t;             // blk.N.ffn_down_t.weight {n_embd, n_ff}: row i = neuron i's down column
                                     // (in a pack: the down columns inside the bundles, stride bundle_bytes)
  // Packs only (nullptr otherwise): bundle k holds source neuron neuron_perm[k], which fired in
  // neuron_freq[k] of the profiled tokens (0 without a profile). Checked at load; (n_ff) each.
  const int32_t* neuron_perm = nullptr;
  const float* neuron_freq = nullptr;
  // Packs only: file offset of blk.N.ffn_bundles. With offloaded bundles (ModelWeights'
  // offload_bundles) the bundle views above have data == nullptr and the neuron cache
  // (core/cache/offloaded_ffn.h) reads the bundles from here.
  uint64_t bundles_offset = 0;
  // Mixture of experts (ModelConfig::is_moe; the dense ffn_* views above are then empty): the
  // router blk.N.ffn_gate_inp.weight and n_expert experts, each part bound from a stacked tensor
  // (llama.cpp's blk.N.ffn_{gate,up,down}_exps.weight, Ember's ffn_down_t_exps, fc1_exps, fc2_exps:
  // one matrix per expert along ne[2]) or from per-expert tensors (blk.N.ffn_gate.E.weight, ...:
  // older llama.cpp files, and PowerInfer's TurboSparse-Mixtral with ffn_down_t.E, fc1.E, fc2.E).
  // docs/moe-format.md lists them.
  MatrixView ffn_gate_inp;           // (n_embd -> n_expert)
  std::vector<ExpertWeights> experts;
};

// Called between the steps of a long load (before each tensor's data is bound, between the stages
// of Model::load, between the hot-neuron reads under a memory budget). It may throw to abandon the
// load, which then unwinds and frees what was loaded (e.g. LoadCancelled, model.h, when the daemon
// is told to stop while it loads). Empty: none.
using LoadCheckpoint = std::function<void()>;

class ModelWeights {
 public:
  // Binds every tensor the config needs. Throws std::runtime_error naming the tensor on a missing
  // tensor, a wrong shape (expected vs actual) or a type the kernels cannot compute with.
  // repack: also keep a copy of each matrix in the kernels' interleaved layout where one exists
  // (Q4_0), which roughly doubles decode speed at the cost of that much extra memory, as
  // llama.cpp's CPU weight repacking does.
  // offload_bundles (packs only): bind everything except the FFN bundles, which stay on storage
  // and are read through the neuron cache (the memory budget); with Mmap, matrices that
  // were repacked give their mapped pages back, so only the repacked copy counts.
  // checkpoint (may be empty) runs before each tensor's data is bound, and may throw to abandon.
  ModelWeights(const gguf::GgufFile& file, const ModelConfig& config, WeightLoad load, bool repack,
               bool offload_bundles = false, const LoadCheckpoint& checkpoint = {});

  MatrixView token_embd;              // (n_embd, n_vocab): row t is token t's embedding
  // With offloaded bundles and an untied output head, the embedding table also stays on storage
  // (token_embd.data == nullptr; OffloadedFfn::embed reads one row per input token from here).
  uint64_t token_embd_offset = 0;
  const float* output_norm = nullptr; // (n_embd)
  MatrixView output;                  // (n_embd -> n_vocab); the embedding when output.weight is absent
  std::vector<LayerWeights> layers;

  uint64_t resident_bytes() const { return resident_bytes_; }
  uint64_t repacked_bytes() const { return repacked_bytes_; }
  // What the bound weights hold in memory: resident + repacked - the pages given back.
  uint64_t memory_bytes() const { return resident_bytes_ + repacked_bytes_ - released_bytes_; }
  bool bundles_offloaded() const { return offload_bundles_; }

  // A neuron-bundle pack (`ember pack`, docs/pack-format.md): FFN neurons are bundles in
  // hottest-first order, gate/up views have row_stride = bundle_bytes, ffn_down.data is nullptr
  // and the down projection exists only neuron-major (ffn_down_t, neuron_down_rows()).
  bool is_pack() const { return is_pack_; }
  const pack::PackInfo& pack_info() const { return pack_info_; }

  // Every layer has predictor tensors (fc1, fc2) / a pre-transposed down (ffn_down_t; always in a pack).
  bool has_predictor() const { return has_predictor_; }
  bool has_down_t() const { return has_down_t_; }
  int64_t max_predictor_rank() const { return max_predictor_rank_; }

  // Layer l's down projection with one row per neuron, for the sparse FFN: ffn_down_t when the
  // file has it (a pack always has: its bundles' down columns), else a transposed copy of ffn_down (F32 or F16, see core/sparse/neuron_rows.h for
  // the memory cost) built for all layers on the first call. Thread-safe; the copy lives as long
  // as the weights. The first call takes a while on big models (it is done when a context with a
  // sparse mode is created, never during decoding).
  MatrixView neuron_down_rows(int64_t layer) const;
  // Bytes of the transposed copies built so far (0 when none, or when ffn_down_t is used).
  uint64_t neuron_rows_bytes() const;

 private:
  // map_data false: shape and type checked, data left null (the tensor stays on storage).
  MatrixView bind_matrix(const gguf::GgufFile& file, const std::string& name, int64_t ne0, int64_t ne1,
                         bool map_data = true);
  // Under a memory budget: the mapped tensor t, just bound to `views` (one matrix, or one per expert
  // of a stacked tensor), is released when all of them are repacked, else copied (see definition).
  void settle_mapped_original(const gguf::GgufFile& file, const gguf::TensorInfo& t, std::span<MatrixView> views);
  const float* bind_vector(const gguf::GgufFile& file, const std::string& name, int64_t n);
  // The tensor's bytes: mapped, or read into an owned buffer (WeightLoad::Read; under
  // offload_bundles everything but what may_map allows, see the definition).
  const void* data_of(const gguf::GgufFile& file, const gguf::TensorInfo& t, bool may_map = false);
  const void* read_into_buffer(const gguf::GgufFile& file, const gguf::TensorInfo& t);
  void bind_sparse_tensors(const gguf::GgufFile& file, const ModelConfig& config);
  void bind_pack_layer(const gguf::GgufFile& file, const ModelConfig& config, int64_t layer);
  // A layer's bundles, neuron permutations and frequencies: n_units of n_ff bundles each (the
  // experts of an MoE layer along ne[2], or 1), checked; what each unit's views point at.
  struct PackUnit {
    MatrixView gate, up, down_t;
    const int32_t* perm = nullptr;
    const float* freq = nullptr;
    uint64_t bundles_offset = 0;
  };
  std::vector<PackUnit> bind_pack_units(const gguf::GgufFile& file, const ModelConfig& config, int64_t layer,
                                        int64_t n_units);
  // model_weights_moe.cpp
  void bind_moe_layer(const gguf::GgufFile& file, const ModelConfig& config, int64_t layer);
  void bind_moe_pack_layer(const gguf::GgufFile& file, const ModelConfig& config, int64_t layer);
  // Expert matrices of one stacked tensor {ne0, ne1, n_expert}: views into one binding.
  std::vector<MatrixView> bind_stacked(const gguf::GgufFile& file, const std::string& name, int64_t ne0, int64_t ne1,
                                       int64_t n_expert);
  // One part of every expert of a layer (part "ffn_gate": ffn_gate_exps or ffn_gate.E); false when
  // the layer has neither form and the part is optional. ne1 < 0: the rank, read from the tensor.
  bool bind_expert_part(const gguf::GgufFile& file, const ModelConfig& config, int64_t layer, const std::string& part,
                        MatrixView ExpertWeights::*view, int64_t ne0, int64_t ne1, bool required);
  void bind_expert_predictors(const gguf::GgufFile& file, const ModelConfig& config, int64_t layer);
  // Predictors and down_t: in every layer or in none (as for dense files).
  void check_moe_sparse_tensors(const ModelConfig& config);
  void repack_if_enabled(MatrixView& m);
  void build_neuron_rows() const;

  WeightLoad load_;
  const LoadCheckpoint* checkpoint_ = nullptr;  // the constructor's, only while it runs
  std::vector<io::MappedRegion> maps_;
  std::vector<io::AlignedBuffer> buffers_;
  std::vector<io::AlignedBuffer> repacked_;
  bool repack_ = false;
  uint64_t resident_bytes_ = 0;
  uint64_t repacked_bytes_ = 0;
  uint64_t released_bytes_ = 0;
  bool offload_bundles_ = false;
  bool has_predictor_ = false;
  bool has_down_t_ = false;
  bool is_pack_ = false;
  pack::PackInfo pack_info_;
  int64_t max_predictor_rank_ = 0;
  // Built lazily by neuron_down_rows(): a cache of derived data, not model state.
  struct NeuronRowsCache {
    std::once_flag once;
    std::vector<std::vector<uint8_t>> bytes;  // per layer
    std::vector<MatrixView> views;            // per layer
    uint64_t total = 0;
  };
  std::unique_ptr<NeuronRowsCache> neuron_rows_ = std::make_unique<NeuronRowsCache>();
};

}  // namespace ember
