#pragma once
// One sequence being evaluated: KV cache, position, and every buffer the forward pass needs,
// all allocated in the constructor so that evaluating tokens never allocates.
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "core/kernels/matmul.h"
#include "core/kernels/thread_pool.h"
#include "core/model/ffn_setup.h"
#include "core/model/kv_cache.h"
#include "core/model/model.h"
#include "core/sparse/ffn_observer.h"
#include "core/sparse/sparse_options.h"
#include "core/sparse/sparse_stats.h"

namespace ember {

// The prompt or generation does not fit in the context window.
class ContextOverflow : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ContextOptions {
  int64_t n_ctx = 0;        // 0: the model's training context, capped at kDefaultMaxContext
  int64_t max_batch = 512;  // tokens per forward step during prefill
  SparseOptions sparse;     // how decode steps run the FFN (default: dense)
  // Sees the gate and up of every dense FFN step (all tokens of all layers; decode steps that run
  // a sparse mode or count diagnostics are not observed); of a mixture of experts, each routed
  // expert's over its tokens, as unit layer * n_expert + expert. Not owned; must outlive the context.
  FfnObserver* ffn_observer = nullptr;
  // Sees the routing of every step of a mixture-of-experts model. Not owned; must outlive the context.
  MoeRouteObserver* moe_observer = nullptr;
  static constexpr int64_t kDefaultMaxContext = 4096;
};

class InferenceContext {
 public:
  // Throws std::invalid_argument when options.sparse does not fit the model (oracle on a SiLU
  // model, predictor without predictor tensors, wrong number of layer thresholds, ...). A sparse
  // mode on a model without ffn_down_t makes the model build its transposed down copy (once).
  InferenceContext(const Model& model, ThreadPool& pool, const ContextOptions& options = {});
  // The FFN strategies hold references into the context's scratch: it stays where it was built.
  InferenceContext(const InferenceContext&) = delete;
  InferenceContext& operator=(const InferenceContext&) = delete;

  // Evaluates tokens at positions [n_past, n_past + tokens.size()) and returns the logits
  // (n_vocab floats, valid until the next call) after the last one. Throws ContextOverflow when
  // they do not fit and std::out_of_range for a token id outside the vocabulary; in both cases
  // nothing is evaluated.
  const float* eval(std::span<const int32_t> tokens);

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return kv_.n_ctx(); }
  // Forgets positions >= n_keep (n_keep <= n_past) so a shared prompt prefix can be reused.
  void truncate(int64_t n_keep);
  void reset() { truncate(0); }

  uint64_t kv_cache_bytes() const { return kv_.bytes(); }
  uint64_t scratch_bytes() const;
  const Model& model() const { return model_; }

  const SparseOptions& sparse_options() const { return sparse_; }
  // Per layer, cumulative since construction or reset_sparse_stats(), decode steps (one token per
  // eval) only. Collected when the sparse mode is not Dense or diagnostics are on; empty counters
  // otherwise.
  const std::vector<SparseLayerStats>& sparse_stats() const { return stats_; }
  SparseLayerStats sparse_totals() const;  // all layers summed
  void reset_sparse_stats();
  // The threshold layer l uses (Predictor and Threshold modes; NaN for the per-token quantile).
  float sparse_threshold(int64_t layer) const { return layer_threshold_.at(static_cast<size_t>(layer)); }

 private:
  void forward_batch(const int32_t* tokens, int64_t n, bool want_logits);
  // Attention output of tokens [first, n) of the current batch.
  void attention(int64_t layer, int64_t first, int64_t n);
  void mm(const MatrixView& w, const float* x, int64_t n, float* y);

  const Model& model_;
  const ModelConfig& c_;
  ThreadPool& pool_;
  int64_t max_batch_;
  // The last layer computes only the rows whose logits are read; an FFN or routing observer
  // (profiling) sees every token of every layer, so then nothing is skipped.
  bool skip_unread_rows_;
  KvCache kv_;
  int64_t n_past_ = 0;
  MatmulScratch mm_scratch_;
  // (max_batch, width) activations
  std::vector<float> x_, xb_, q_, k_, v_, att_, tmp_, gate_, up_;
  std::vector<float> rope_cs_;          // (max_batch, n_rot)
  std::vector<float> att_scratch_;      // (threads, attention_scratch_floats())
  int64_t attention_scratch_floats() const;
  std::vector<float> logits_;           // (n_vocab)

  // The FFN, chosen once (ffn_setup.h): the strategies for prompt batches and decode steps.
  SparseOptions sparse_;
  std::vector<float> layer_threshold_;  // (n_layer)
  std::vector<SparseLayerStats> stats_; // (n_layer) decode steps, counted by the CountedFfn decorator
  OffloadedFfn* offload_ = nullptr;     // the model's neuron cache under a memory budget, or null
  FfnStrategies ffn_;
};

}  // namespace ember
