#pragma once
// Teacher-forced evaluation of a model configuration on a text: perplexity, and against a dense
// reference run of the same model, the KL divergence and top-1 agreement of the next-token
// distributions at every position. `ember eval` is a thin front end over this.
//
// Every token goes through its own one-token eval() call: those are decode steps, the only steps
// on which the sparse FFN runs (prefill, several tokens per eval, is always dense). Evaluating the
// text as a batched prompt would therefore measure the dense model whatever the sparse mode.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "core/model/inference_context.h"

namespace ember {

struct TextEvalResult {
  uint64_t tokens = 0;  // positions scored (next-token predictions)
  uint64_t windows = 0;
  double mean_nll = 0.0;    // nats per scored token
  double perplexity = 0.0;  // exp(mean_nll)
  // Against the dense reference (NaN without one): mean KL(dense || configuration) in nats, and
  // the share of positions whose argmax tokens agree.
  double kl_mean = std::numeric_limits<double>::quiet_NaN();
  double top1_agreement = std::numeric_limits<double>::quiet_NaN();
  double ffn_active_fraction = 1.0;           // share of FFN neurons computed (1 for dense)
  std::vector<double> layer_active_fraction;  // (n_layer)
};

// done and total count scored positions.
using TextEvalProgress = std::function<void(uint64_t done, uint64_t total)>;

class TextEvaluator {
 public:
  // options: the configuration under test (ContextOptions::sparse; n_ctx is the window, 0 for the
  // model's default). compare_dense: also run a dense context over the same windows. Every buffer
  // is allocated here; evaluate() allocates nothing per token. Throws std::invalid_argument when
  // the options do not fit the model (see InferenceContext) or the context is under 2 tokens.
  TextEvaluator(const Model& model, ThreadPool& pool, const ContextOptions& options, bool compare_dense);
  ~TextEvaluator();

  // Text tokens (no BOS) per window: n_ctx, less one when the tokenizer has a BOS token. Each
  // window starts from an empty context with BOS (when there is one), then its tokens; all of
  // them are scored after BOS, all but the first without it.
  int64_t window_tokens() const { return window_; }
  // Positions evaluate() would score for a text of n tokens.
  uint64_t scored_positions(uint64_t n_tokens) const;

  // Throws std::invalid_argument when fewer than 2 tokens (nothing to score) and std::out_of_range
  // for a token id outside the vocabulary.
  TextEvalResult evaluate(std::span<const int32_t> tokens, const TextEvalProgress& progress = {});

  // The configuration's context (its thresholds: sparse_threshold(layer)).
  const InferenceContext& context() const { return *ctx_; }

 private:
  const Model& model_;
  std::unique_ptr<InferenceContext> ctx_, dense_;
  int32_t bos_ = -1;
  int64_t window_ = 0;
};

// Negative log-likelihood of `target` under softmax(logits), in double, stable (max subtracted).
double next_token_nll(const float* logits, int64_t n_vocab, int32_t target);
// KL(softmax(p) || softmax(q)) in nats, double, stable.
double kl_divergence(const float* p_logits, const float* q_logits, int64_t n_vocab);

}  // namespace ember
