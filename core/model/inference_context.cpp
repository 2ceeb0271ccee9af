#include "core/model/inference_context.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/kernels/attention.h"
#include "core/kernels/type_traits.h"
#include "core/model/ops.h"

namespace ember {
namespace {

int64_t resolve_context(const ModelConfig& c, const ContextOptions& o) {
  if (o.n_ctx < 0) throw std::invalid_argument("context size must not be negative");
  if (o.n_ctx == 0) return std::min<int64_t>(c.n_ctx_train, ContextOptions::kDefaultMaxContext);
  return o.n_ctx;
}

size_t sz(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

}  // namespace

InferenceContext::InferenceContext(const Model& model, ThreadPool& pool, const ContextOptions& options)
    : model_(model),
      c_(model.config()),
      pool_(pool),
      max_batch_(std::max<int64_t>(1, options.max_batch)),
      skip_unread_rows_(options.ffn_observer == nullptr && options.moe_observer == nullptr),
      kv_(c_, resolve_context(c_, options)),
      offload_(model.offloaded_ffn()) {
  const int64_t B = max_batch_;
  x_.assign(sz(B, c_.n_embd), 0.0f);
  xb_.assign(sz(B, c_.n_embd), 0.0f);
  q_.assign(sz(B, c_.n_embd_q()), 0.0f);
  k_.assign(sz(B, c_.n_embd_kv()), 0.0f);
  v_.assign(sz(B, c_.n_embd_kv()), 0.0f);
  att_.assign(sz(B, c_.n_embd_q()), 0.0f);
  tmp_.assign(sz(B, std::max(c_.n_embd, c_.n_embd_q())), 0.0f);
  gate_.assign(sz(B, c_.n_ff), 0.0f);
  up_.assign(sz(B, c_.n_ff), 0.0f);
  rope_cs_.assign(sz(B, c_.n_rot), 0.0f);
  att_scratch_.assign(sz(pool_.size(), attention_scratch_floats()), 0.0f);
  logits_.assign(static_cast<size_t>(c_.n_vocab), 0.0f);
  mm_scratch_.reserve(B, std::max({c_.n_embd, c_.n_ff, c_.n_embd_q(), model.weights().max_predictor_rank()}));

  check_sparse_options(options.sparse, c_, model.weights(), offload_ != nullptr, options.ffn_observer != nullptr);
  sparse_ = options.sparse;
  layer_threshold_ = layer_thresholds(sparse_, c_);
  stats_.assign(static_cast<size_t>(c_.n_layer), SparseLayerStats{});
  const FfnEnv env{c_, model.weights(), pool_, mm_scratch_, gate_, up_};
  ffn_ = choose_ffn(env, FfnChoice{sparse_, layer_threshold_, options.ffn_observer, offload_, stats_, options.moe_observer});
}

SparseLayerStats InferenceContext::sparse_totals() const {
  SparseLayerStats total;
  for (const SparseLayerStats& s : stats_) total += s;
  return total;
}

void InferenceContext::reset_sparse_stats() { std::fill(stats_.begin(), stats_.end(), SparseLayerStats{}); }

uint64_t InferenceContext::scratch_bytes() const {
  const size_t floats = x_.size() + xb_.size() + q_.size() + k_.size() + v_.size() + att_.size() + tmp_.size() +
                        gate_.size() + up_.size() + rope_cs_.size() + logits_.size();
  return (floats + att_scratch_.size()) * sizeof(float) + ffn_.scratch_bytes();
}

int64_t InferenceContext::attention_scratch_floats() const {
  const int64_t group = c_.n_head / c_.n_head_kv;
  return group * n_ctx() + c_.head_dim + group * c_.head_dim;  // scores, one row, rounded queries
}

void InferenceContext::truncate(int64_t n_keep) {
  if (n_keep < 0 || n_keep > n_past_) {
    throw std::out_of_range("truncate(" + std::to_string(n_keep) + ") outside [0, " + std::to_string(n_past_) + "]");
  }
  n_past_ = n_keep;  // positions beyond n_past are never read, so the cache needs no clearing
}

const float* InferenceContext::eval(std::span<const int32_t> tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw std::invalid_argument("eval() needs at least one token");
  for (int32_t t : tokens) {
    if (t < 0 || t >= c_.n_vocab) {
      throw std::out_of_range("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                              std::to_string(c_.n_vocab) + ")");
    }
  }
  if (n > n_ctx() - n_past_) {
    throw ContextOverflow(std::to_string(n) + " tokens at position " + std::to_string(n_past_) +
                          " do not fit in the context of " + std::to_string(n_ctx()) + " tokens");
  }
  for (int64_t done = 0; done < n; done += max_batch_) {
    const int64_t chunk = std::min(max_batch_, n - done);
    forward_batch(tokens.data() + done, chunk, done + chunk == n);
  }
  return logits_.data();
}

void InferenceContext::mm(const MatrixView& w, const float* x, int64_t n, float* y) {
  matmul(w, x, n, w.cols, y, w.rows, pool_, mm_scratch_);
}

void InferenceContext::forward_batch(const int32_t* tokens, int64_t n, bool want_logits) {
  const ModelWeights& w = model_.weights();
  const int64_t E = c_.n_embd, Eq = c_.n_embd_q(), Ekv = c_.n_embd_kv(), R = c_.n_rot;
  const KernelTraits* embd = kernel_traits(w.token_embd.type);
  const KernelTraits* f16 = kernel_traits(GgmlType::F16);

  // Per-token work that is not a matmul, for tokens [from, n), spread over the pool when there are
  // several.
  auto per_token = [&](int64_t from, auto&& fn) {
    if (n - from == 1) {
      fn(from);
    } else {
      pool_.parallel_for(n - from, [&](int64_t i, int) { fn(from + i); });
    }
  };

  per_token(0, [&](int64_t t) {
    if (w.token_embd.data == nullptr) {  // under a memory budget the table stays on storage
      offload_->embed(tokens[t], &x_[sz(t, E)]);
    } else {
      const auto* row = static_cast<const uint8_t*>(w.token_embd.data) + w.token_embd.row_stride * static_cast<uint64_t>(tokens[t]);
      embd->to_float(row, &x_[sz(t, E)], E);
    }
    rope_table(n_past_ + t, R, c_.rope_theta, &rope_cs_[sz(t, R)]);
  });

  // Decode steps (one token) run the decode strategy (a sparse mode, counted); prompt batches the
  // dense one. Chosen once per batch; every layer then runs the same code.
  FfnStrategy& ffn = n == 1 ? *ffn_.decode : *ffn_.batch;
  for (int64_t l = 0; l < c_.n_layer; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    FfnStepReport report;
    ffn.prefetch(l, x_.data(), report);
    per_token(0, [&](int64_t t) { rms_norm(&x_[sz(t, E)], L.attn_norm, &xb_[sz(t, E)], E, c_.rms_eps); });
    mm(L.wq, xb_.data(), n, q_.data());
    mm(L.wk, xb_.data(), n, k_.data());
    mm(L.wv, xb_.data(), n, v_.data());
    per_token(0, [&](int64_t t) {
      const float* cs = &rope_cs_[sz(t, R)];
      rope_apply(&q_[sz(t, Eq)], c_.n_head, c_.head_dim, R, cs);
      rope_apply(&k_[sz(t, Ekv)], c_.n_head_kv, c_.head_dim, R, cs);
      f16->from_float(&k_[sz(t, Ekv)], kv_.k(l, n_past_ + t), Ekv);
      f16->from_float(&v_[sz(t, Ekv)], kv_.v(l, n_past_ + t), Ekv);
    });
    // The last layer's output matters only where logits are read: for the last token, or for none
    // when this is not the final chunk of a prompt (its keys and values are cached above).
    int64_t first = 0;
    if (l == c_.n_layer - 1 && skip_unread_rows_) {
      if (!want_logits) break;
      first = n - 1;
    }
    const int64_t m = n - first;
    attention(l, first, n);
    mm(L.wo, &att_[sz(first, Eq)], m, &tmp_[sz(first, E)]);
    per_token(first, [&](int64_t t) {
      add_in_place(&x_[sz(t, E)], &tmp_[sz(t, E)], E);
      rms_norm(&x_[sz(t, E)], L.ffn_norm, &xb_[sz(t, E)], E, c_.rms_eps);
    });
    ffn.run(l, FfnIo{&x_[sz(first, E)], &xb_[sz(first, E)], m, &tmp_[sz(first, E)]}, report);
    per_token(first, [&](int64_t t) { add_in_place(&x_[sz(t, E)], &tmp_[sz(t, E)], E); });
  }
  n_past_ += n;

  if (want_logits) {
    rms_norm(&x_[sz(n - 1, E)], w.output_norm, xb_.data(), E, c_.rms_eps);
    mm(w.output, xb_.data(), 1, logits_.data());
  }
}

void InferenceContext::attention(int64_t layer, int64_t first, int64_t n) {
  const int64_t hd = c_.head_dim, group = c_.n_head / c_.n_head_kv, n_kv_heads = c_.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t scratch = attention_scratch_floats();
  // One chunk = one token's query heads that share a KV head, so each cached row is converted
  // once per chunk and used by the whole group.
  pool_.parallel_for((n - first) * n_kv_heads, [&](int64_t chunk, int thread) {
    const int64_t t = first + chunk / n_kv_heads, g = chunk % n_kv_heads;
    float* mine = &att_scratch_[sz(thread, scratch)];
    AttentionGroupArgs a;
    a.q = &q_[sz(t, c_.n_embd_q()) + static_cast<size_t>(g * group * hd)];
    a.n_q = group;
    a.k = kv_.k(layer, 0) + g * hd;
    a.v = kv_.v(layer, 0) + g * hd;
    a.kv_stride = kv_.row_elements();
    a.n_kv = n_past_ + t + 1;  // causal: a token sees itself and everything before it
    a.head_dim = hd;
    a.scale = scale;
    a.out = &att_[sz(t, c_.n_embd_q()) + static_cast<size_t>(g * group * hd)];
    a.scores = mine;
    a.row = mine + group * n_ctx();
    a.qf = a.row + hd;
    attention_group_f16(a);
  });
}

}  // namespace ember
