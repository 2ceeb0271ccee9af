#include "core/model/inference_context.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/kernels/attention.h"
#include "core/kernels/type_traits.h"
#include "core/model/ops.h"
#include "core/sparse/active_set.h"
#include "core/sparse/neuron_rows_matmul.h"
#include "core/sparse/predictor.h"
#include "core/util/clock.h"

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
      observer_(options.ffn_observer),
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
  setup_sparse(options.sparse);
}

void InferenceContext::setup_sparse(const SparseOptions& o) {
  using Mode = SparseOptions::Mode;
  const ModelWeights& w = model_.weights();
  if (o.mode == Mode::Oracle && !is_relu_family(c_.activation)) {
    throw std::invalid_argument("sparse mode oracle needs a ReLU-family FFN (relu, drelu); this model's is " +
                                std::string(activation_name(c_.activation)));
  }
  if (o.mode == Mode::Predictor && !w.has_predictor()) {
    throw std::invalid_argument("sparse mode predictor needs predictor tensors (blk.N.fc1.weight, blk.N.fc2.weight); "
                                "this model has none");
  }
  if (!o.layer_thresholds.empty() && static_cast<int64_t>(o.layer_thresholds.size()) != c_.n_layer) {
    throw std::invalid_argument("sparse: " + std::to_string(o.layer_thresholds.size()) +
                                " layer thresholds given, the model has " + std::to_string(c_.n_layer) + " layers");
  }
  for (float t : o.layer_thresholds) {
    if (!std::isfinite(t)) throw std::invalid_argument("sparse: layer thresholds must be finite numbers");
  }
  if (!std::isnan(o.threshold_override) && !std::isfinite(o.threshold_override)) {
    throw std::invalid_argument("sparse: threshold must be a finite number (or NaN for the model's)");
  }
  if (!(o.target_sparsity >= 0.0f && o.target_sparsity < 1.0f)) {
    throw std::invalid_argument("sparse: target sparsity must be in [0, 1)");
  }
  if (offload_ != nullptr) {
    // Under a memory budget the FFN weights are read on demand: only what needs no dense gate.
    if (o.mode == Mode::Oracle || o.mode == Mode::Threshold) {
      throw std::invalid_argument(std::string("sparse mode ") + (o.mode == Mode::Oracle ? "oracle" : "threshold") +
                                  " computes every neuron's gate, which a memory budget keeps on storage; "
                                  "use the predictor mode or dense");
    }
    if (o.diagnostics) {
      throw std::invalid_argument("sparse diagnostics (recall, precision) compute the dense FFN alongside; "
                                  "they need the whole model in memory (no memory budget)");
    }
    if (observer_ != nullptr) throw std::invalid_argument("profiling needs the whole model in memory (no memory budget)");
  }
  sparse_ = o;
  collect_stats_ = o.mode != Mode::Dense || o.diagnostics;
  stats_.assign(static_cast<size_t>(c_.n_layer), SparseLayerStats{});
  // Thresholds per layer: explicit per-layer values, else the override, else (predictor) the
  // file's powerinfer.sparse_threshold or (threshold mode) the per-token quantile.
  quantile_threshold_ = false;
  float uniform = o.threshold_override;
  if (std::isnan(uniform)) {
    if (o.mode == Mode::Predictor) uniform = c_.sparse_threshold;
    if (o.mode == Mode::Threshold && o.layer_thresholds.empty()) quantile_threshold_ = true;
  }
  layer_threshold_.assign(static_cast<size_t>(c_.n_layer), uniform);
  if (!o.layer_thresholds.empty()) layer_threshold_ = o.layer_thresholds;
  if (quantile_threshold_) std::fill(layer_threshold_.begin(), layer_threshold_.end(), NAN);
  if (o.mode == Mode::Dense) return;

  const int64_t F = c_.n_ff;
  down_rows_.resize(static_cast<size_t>(c_.n_layer));
  for (int64_t l = 0; l < c_.n_layer; ++l) down_rows_[static_cast<size_t>(l)] = w.neuron_down_rows(l);
  sparse_scratch_.reserve(c_.n_embd, F, pool_.size());
  active_.assign(static_cast<size_t>(F), 0);
  pred_hidden_.assign(static_cast<size_t>(std::max<int64_t>(1, w.max_predictor_rank())), 0.0f);
  scores_.assign(static_cast<size_t>(F), 0.0f);
  if (o.diagnostics) dense_h_.assign(static_cast<size_t>(F), 0.0f);
  if (offload_ != nullptr) bundle_ffn_.reserve(offload_->layout(), F, pool_.size());
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
  const size_t sparse = active_.size() + pred_hidden_.size() + scores_.size() + dense_h_.size();
  return (floats + att_scratch_.size() + sparse) * sizeof(float) + sparse_scratch_.bytes() + bundle_ffn_.bytes();
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

void InferenceContext::ffn_down(const LayerWeights& L, const float* h, int64_t n, float* y) {
  if (L.ffn_down.data != nullptr) {
    mm(L.ffn_down, h, n, y);
  } else {  // a pack: the down columns live in the bundles (ModelWeights::is_pack)
    neuron_rows_matmul(L.ffn_down_t, h, n, c_.n_ff, y, c_.n_embd, pool_);
  }
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

  // Decode steps (one token) count into the sparse counters and run the sparse FFN when a sparse
  // mode is set; prefill batches always run dense.
  const bool decode_step = n == 1;
  const bool counted = decode_step && collect_stats_;
  const bool sparse_ffn_on = decode_step && sparse_.mode != SparseOptions::Mode::Dense;
  const bool prefetch_on = sparse_ffn_on && offload_ != nullptr && offload_->prefetch_enabled() &&
                           sparse_.mode == SparseOptions::Mode::Predictor;
  for (int64_t l = 0; l < c_.n_layer; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    if (prefetch_on) prefetch_layer(l, L, counted ? &stats_[static_cast<size_t>(l)] : nullptr);
    const uint64_t t_layer = counted ? now_ns() : 0;
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
    // An FFN observer (profiling) sees every token of every layer, so nothing is skipped then.
    int64_t first = 0;
    if (l == c_.n_layer - 1 && observer_ == nullptr) {
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
    if (counted) {  // always the case for a sparse decode step
      SparseLayerStats& st = stats_[static_cast<size_t>(l)];
      st.attention_ns += now_ns() - t_layer;
      if (sparse_ffn_on) ffn_decode_sparse(l, L, st);
      else ffn_decode_dense_counted(L, st);
    } else {
      ffn_dense(l, L, first, m);
    }
    per_token(first, [&](int64_t t) { add_in_place(&x_[sz(t, E)], &tmp_[sz(t, E)], E); });
  }
  n_past_ += n;

  if (want_logits) {
    rms_norm(&x_[sz(n - 1, E)], w.output_norm, xb_.data(), E, c_.rms_eps);
    mm(w.output, xb_.data(), 1, logits_.data());
  }
}

void InferenceContext::ffn_dense(int64_t l, const LayerWeights& L, int64_t first, int64_t m) {
  const int64_t E = c_.n_embd, F = c_.n_ff;
  if (offload_ != nullptr) {  // the bundles are streamed from storage (no observer: see setup_sparse)
    offload_->dense_step(l, &xb_[sz(first, E)], m, &gate_[sz(first, F)], &up_[sz(first, F)], &tmp_[sz(first, E)],
                         pool_, mm_scratch_);
    return;
  }
  mm(L.ffn_gate, &xb_[sz(first, E)], m, &gate_[sz(first, F)]);
  mm(L.ffn_up, &xb_[sz(first, E)], m, &up_[sz(first, F)]);
  if (observer_ != nullptr) {
    FfnObservation obs;
    obs.layer = l;
    obs.n_tokens = m;
    obs.n_embd = E;
    obs.n_ff = F;
    obs.residual = &x_[sz(first, E)];
    obs.gate = &gate_[sz(first, F)];
    obs.up = &up_[sz(first, F)];
    observer_->observe(obs, pool_);
  }
  auto activate = [&](int64_t i, int) { ffn_activation(&gate_[sz(first + i, F)], &up_[sz(first + i, F)], F, c_.activation); };
  if (m == 1) activate(0, 0);
  else pool_.parallel_for(m, activate);
  ffn_down(L, &gate_[sz(first, F)], m, &tmp_[sz(first, E)]);
}

void InferenceContext::ffn_decode_dense_counted(const LayerWeights& L, SparseLayerStats& st) {
  const int64_t F = c_.n_ff;
  const uint64_t t0 = now_ns();
  mm(L.ffn_gate, xb_.data(), 1, gate_.data());
  mm(L.ffn_up, xb_.data(), 1, up_.data());
  ffn_activation(gate_.data(), up_.data(), F, c_.activation);
  ffn_down(L, gate_.data(), 1, tmp_.data());
  const uint64_t t1 = now_ns();
  const auto truly = static_cast<uint64_t>(count_nonzero(gate_.data(), F));
  st.tokens += 1;
  st.neurons += static_cast<uint64_t>(F);
  st.active += static_cast<uint64_t>(F);
  st.truly_active += truly;
  st.true_positive += truly;
  st.ffn_ns += t1 - t0;
}

void InferenceContext::prefetch_layer(int64_t l, const LayerWeights& L, SparseLayerStats* st) {
  // The residual entering the layer stands in for the one entering its FFN (attention changes it
  // little): the predicted bundles are read while the attention runs. active_ is free until the
  // real prediction (the fetcher keeps its own copy of the list).
  const uint64_t t0 = now_ns();
  const int64_t n = predict_layer(l, L);
  if (n < c_.n_ff) offload_->prefetch(l, active_.data(), n);  // a dense step streams the layer anyway
  if (st != nullptr) st->predictor_ns += now_ns() - t0;
}

int64_t InferenceContext::predict_layer(int64_t l, const LayerWeights& L) {
  PredictorArgs p;
  p.fc1 = L.pred_fc1;
  p.fc2 = L.pred_fc2;
  p.x = x_.data();  // the residual stream (before ffn_norm, or entering the layer for a prefetch)
  p.threshold = layer_threshold_[static_cast<size_t>(l)];
  p.hidden = pred_hidden_.data();
  p.scores = scores_.data();
  p.active = active_.data();
  return predict_active_neurons(p, pool_, mm_scratch_);
}

void InferenceContext::ffn_decode_sparse(int64_t l, const LayerWeights& L, SparseLayerStats& st) {
  using Mode = SparseOptions::Mode;
  const int64_t F = c_.n_ff;
  float* gate = gate_.data();  // row 0 of the batch buffers
  float* up = up_.data();
  int32_t* active = active_.data();
  bool dense_gate = false, dense_up = false;
  const float* gate_values = nullptr;
  int64_t n_active = 0;

  const uint64_t t0 = now_ns();
  switch (sparse_.mode) {
    case Mode::Oracle:
      // The exact active set from the dense gate (and up); the sparse kernel then recomputes the
      // gate and up of those neurons itself, so this mode tests the same gather path as the others.
      mm(L.ffn_gate, xb_.data(), 1, gate);
      dense_gate = true;
      if (c_.activation == FfnActivation::DReLU) {
        mm(L.ffn_up, xb_.data(), 1, up);
        dense_up = true;
      }
      n_active = select_relu_active(gate, up, F, c_.activation, active);
      break;
    case Mode::Predictor:
      n_active = predict_layer(l, L);  // into active_
      break;
    case Mode::Threshold: {
      mm(L.ffn_gate, xb_.data(), 1, gate);
      dense_gate = true;
      gate_values = gate;
      const float threshold =
          quantile_threshold_ ? gate_magnitude_quantile(gate, F, c_.activation, sparse_.target_sparsity, scores_.data())
                              : layer_threshold_[static_cast<size_t>(l)];
      n_active = select_by_gate_magnitude(gate, F, c_.activation, threshold, active);
      break;
    }
    case Mode::Dense: break;  // not called for Dense
  }
  const uint64_t t1 = now_ns();
  if (sparse_.diagnostics) {
    // The true activations, computed densely, only to count recall and precision.
    if (!dense_gate) mm(L.ffn_gate, xb_.data(), 1, gate);
    if (!dense_up) mm(L.ffn_up, xb_.data(), 1, up);
    dense_gate = dense_up = true;
    std::memcpy(dense_h_.data(), gate, sz(F, 1) * sizeof(float));
    ffn_activation(dense_h_.data(), up, F, c_.activation);
    st.truly_active += static_cast<uint64_t>(count_nonzero(dense_h_.data(), F));
    st.true_positive += static_cast<uint64_t>(count_nonzero_at(dense_h_.data(), active, n_active));
  }
  const uint64_t t2 = now_ns();
  if (offload_ != nullptr) {
    // Through the neuron cache (predictor mode; setup_sparse refused the others).
    if (n_active == F) ffn_dense(l, L, 0, 1);
    else offload_->sparse_step(l, xb_.data(), active, n_active, pool_, bundle_ffn_, tmp_.data());
  } else if (n_active == F) {
    // Nothing skipped: the dense kernels, so the result is the dense path's bit for bit.
    if (!dense_gate) mm(L.ffn_gate, xb_.data(), 1, gate);
    if (!dense_up) mm(L.ffn_up, xb_.data(), 1, up);
    ffn_activation(gate, up, F, c_.activation);
    ffn_down(L, gate, 1, tmp_.data());
  } else {
    SparseFfnArgs a;
    a.gate = L.ffn_gate;
    a.up = L.ffn_up;
    a.down_rows = down_rows_[static_cast<size_t>(l)];
    a.act = c_.activation;
    a.x = xb_.data();
    a.active = active;
    a.n_active = n_active;
    a.gate_values = gate_values;
    a.out = tmp_.data();
    sparse_ffn(a, pool_, sparse_scratch_);
  }
  const uint64_t t3 = now_ns();
  st.tokens += 1;
  st.neurons += static_cast<uint64_t>(F);
  st.active += static_cast<uint64_t>(n_active);
  st.predictor_ns += t1 - t0;
  st.diagnostics_ns += t2 - t1;
  st.ffn_ns += t3 - t2;
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
