#include "core/model/text_evaluation.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ember {
namespace {

// log(sum_i exp(l_i)) in double, with the maximum subtracted so no exp overflows.
double log_sum_exp(const float* l, int64_t n) {
  const double m = *std::max_element(l, l + n);
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(l[i]) - m);
  return m + std::log(s);
}

int32_t argmax(const float* l, int64_t n) { return static_cast<int32_t>(std::max_element(l, l + n) - l); }

}  // namespace

double next_token_nll(const float* logits, int64_t n_vocab, int32_t target) {
  return log_sum_exp(logits, n_vocab) - static_cast<double>(logits[target]);
}

double kl_divergence(const float* p_logits, const float* q_logits, int64_t n_vocab) {
  const double zp = log_sum_exp(p_logits, n_vocab), zq = log_sum_exp(q_logits, n_vocab);
  double kl = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) {
    const double lp = static_cast<double>(p_logits[i]) - zp, lq = static_cast<double>(q_logits[i]) - zq;
    kl += std::exp(lp) * (lp - lq);
  }
  // Rounding can leave a tiny negative sum for identical distributions; KL is never negative.
  return std::max(kl, 0.0);
}

TextEvaluator::TextEvaluator(const Model& model, ThreadPool& pool, const ContextOptions& options, bool compare_dense)
    : model_(model), bos_(model.tokenizer().bos_id()) {
  ContextOptions o = options;
  // Every eval() here is one token, so prefill-sized scratch would be wasted memory.
  o.max_batch = 1;
  ctx_ = std::make_unique<InferenceContext>(model, pool, o);
  if (compare_dense) {
    ContextOptions d = o;
    d.sparse = SparseOptions{};  // the reference: the dense FFN, same window
    dense_ = std::make_unique<InferenceContext>(model, pool, d);
  }
  window_ = ctx_->n_ctx() - (bos_ >= 0 ? 1 : 0);
  if (window_ < 2) {
    throw std::invalid_argument("a context of " + std::to_string(ctx_->n_ctx()) +
                                " tokens is too small to evaluate text (need at least " +
                                std::to_string(bos_ >= 0 ? 3 : 2) + ")");
  }
}

TextEvaluator::~TextEvaluator() = default;

uint64_t TextEvaluator::scored_positions(uint64_t n_tokens) const {
  const uint64_t w = static_cast<uint64_t>(window_);
  const uint64_t windows = (n_tokens + w - 1) / w;
  // Without BOS the first token of each window has nothing before it to be predicted from.
  return bos_ >= 0 ? n_tokens : n_tokens - windows;
}

TextEvalResult TextEvaluator::evaluate(std::span<const int32_t> tokens, const TextEvalProgress& progress) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < 2) {
    throw std::invalid_argument("the text is " + std::to_string(n) + " token" + (n == 1 ? "" : "s") +
                                " long; evaluation needs at least 2");
  }
  const int64_t V = model_.config().n_vocab;
  for (int64_t i = 0; i < n; ++i) {
    // Checked up front: a target is scored (read as a logit index) before it is ever evaluated.
    if (tokens[i] < 0 || tokens[i] >= V) {
      throw std::out_of_range("token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                              " is outside the vocabulary of " + std::to_string(V));
    }
  }

  TextEvalResult r;
  const uint64_t total = scored_positions(static_cast<uint64_t>(n));
  double sum_nll = 0.0, sum_kl = 0.0;
  uint64_t agree = 0;
  ctx_->reset_sparse_stats();
  const float* logits = nullptr;  // the configuration's, after the last evaluated token
  const float* ref = nullptr;     // the dense reference's
  auto step = [&](int32_t token) {
    logits = ctx_->eval(std::span<const int32_t>(&token, 1));
    if (dense_) ref = dense_->eval(std::span<const int32_t>(&token, 1));
  };

  for (int64_t start = 0; start < n; start += window_) {
    const int64_t len = std::min(window_, n - start);
    const int32_t* w = tokens.data() + start;
    ctx_->reset();
    if (dense_) dense_->reset();
    ++r.windows;
    int64_t i = 0;
    if (bos_ >= 0) {
      step(bos_);
    } else {
      step(w[0]);
      i = 1;
    }
    for (; i < len; ++i) {
      const int32_t target = w[i];
      sum_nll += next_token_nll(logits, V, target);
      if (dense_) {
        sum_kl += kl_divergence(ref, logits, V);
        agree += argmax(ref, V) == argmax(logits, V) ? 1 : 0;
      }
      ++r.tokens;
      if (progress) progress(r.tokens, total);
      if (i + 1 < len) step(target);  // the window's last token predicts nothing scored
    }
  }

  const double scored = static_cast<double>(r.tokens);
  r.mean_nll = r.tokens ? sum_nll / scored : 0.0;
  r.perplexity = std::exp(r.mean_nll);
  if (dense_ && r.tokens) {
    r.kl_mean = sum_kl / scored;
    r.top1_agreement = static_cast<double>(agree) / scored;
  }
  const bool dense = ctx_->sparse_options().mode == SparseOptions::Mode::Dense;
  r.ffn_active_fraction = dense ? 1.0 : ctx_->sparse_totals().active_fraction();
  r.layer_active_fraction.assign(static_cast<size_t>(model_.config().n_layer), 1.0);
  const std::vector<SparseLayerStats>& layers = ctx_->sparse_stats();
  if (!dense) {
    for (size_t l = 0; l < layers.size() && l < r.layer_active_fraction.size(); ++l) {
      r.layer_active_fraction[l] = layers[l].active_fraction();
    }
  }
  return r;
}

}  // namespace ember
