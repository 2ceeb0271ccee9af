#pragma once
// A plain F32 forward pass of a synthetic llama model, written for the tests only, that records
// what the FFN of every layer computes at every position: the gate and up pre-activations and, for
// PowerInfer files, the predictor's scores; for mixtures of experts, the router's logits and the
// same per expert at the positions routed to it. It reads the weights the file really holds
// (dequantized by the kernels' to_float), so the sparsity and routing it measures are the
// model's, not the design's intent.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/kernels/type_traits.h"

namespace ember::test {

struct Matrix {
  int64_t cols = 0, rows = 0;  // cols = ne[0]
  std::vector<float> v;
  const float* row(int64_t r) const { return v.data() + r * cols; }
  void apply(const float* x, float* y) const { apply_rows(0, rows, x, y); }
  // y = rows [first, first + n) times x (one expert of a stacked expert tensor).
  void apply_rows(int64_t first, int64_t n, const float* x, float* y) const {
    for (int64_t r = 0; r < n; ++r) {
      const float* w = row(first + r);
      double s = 0.0;
      for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(w[c]) * x[c];
      y[r] = static_cast<float>(s);
    }
  }
};

inline Matrix load_matrix(const gguf::GgufFile& f, const std::string& name) {
  const auto* t = f.find_tensor(name);
  if (t == nullptr) throw std::runtime_error("no tensor " + name);
  std::vector<uint8_t> raw(t->n_bytes);
  f.read_tensor(*t, raw.data());
  Matrix m;
  m.cols = static_cast<int64_t>(t->ne[0]);
  m.rows = static_cast<int64_t>(t->n_elements / t->ne[0]);
  m.v.resize(t->n_elements);
  if (t->type == GgmlType::F32) {
    std::memcpy(m.v.data(), raw.data(), raw.size());
  } else {
    const KernelTraits* k = kernel_traits(t->type);
    for (int64_t r = 0; r < m.rows; ++r)
      k->to_float(raw.data() + static_cast<uint64_t>(r) * t->row_bytes(), m.v.data() + r * m.cols, m.cols);
  }
  return m;
}

// What one FFN computed: [position][neuron]; score only for PowerInfer files.
struct FfnRecord {
  std::vector<int64_t> positions;  // mixtures of experts: the positions routed to this expert
  std::vector<std::vector<float>> gate, up, score;
};

struct FfnTrace {
  // [layer][position][neuron]; empty for mixtures of experts
  std::vector<std::vector<std::vector<float>>> gate, up, score;
  // [layer][position][expert]: the router's logits (mixtures of experts only)
  std::vector<std::vector<std::vector<float>>> router;
  // [layer][expert]: each expert at the positions routed to it (mixtures of experts only)
  std::vector<std::vector<FfnRecord>> experts;
};

// One layer's FFN tensors as the file holds them; expert tensors stacked (unit e is rows
// [e * per-unit rows, ...); a dense layer is unit 0). Sparse mixtures have ffn_down_t_exps only.
struct FfnWeights {
  Matrix gate, up, down, down_t, fc1, fc2;
  int64_t n_ff = 0, dim = 0;
  std::string act;
  bool has_pred() const { return !fc1.v.empty(); }
};

inline bool has_tensor(const gguf::GgufFile& f, const std::string& name) { return f.find_tensor(name) != nullptr; }

inline FfnWeights load_ffn(const gguf::GgufFile& f, const std::string& p, bool moe, int64_t n_ff, int64_t dim,
                           const std::string& act) {
  const std::string exps = moe ? "_exps" : "";
  FfnWeights w;
  w.n_ff = n_ff, w.dim = dim, w.act = act;
  w.gate = load_matrix(f, p + "ffn_gate" + exps + ".weight");
  w.up = load_matrix(f, p + "ffn_up" + exps + ".weight");
  if (has_tensor(f, p + "ffn_down" + exps + ".weight")) w.down = load_matrix(f, p + "ffn_down" + exps + ".weight");
  else w.down_t = load_matrix(f, p + "ffn_down_t" + exps + ".weight");
  if (has_tensor(f, p + "fc1" + exps + ".weight"))
    w.fc1 = load_matrix(f, p + "fc1" + exps + ".weight"), w.fc2 = load_matrix(f, p + "fc2" + exps + ".weight");
  return w;
}

// Unit e of the FFN on h = ffn_norm(x) (the predictor reads x, the residual before the FFN), its
// output times `weight` added to `out` (which may be x: it is read first); records gate, up and
// score in `rec`.
inline void run_ffn(const FfnWeights& w, int64_t e, const float* x, const float* h, float weight, float* out,
                    FfnRecord& rec) {
  std::vector<float> g(w.n_ff), u(w.n_ff), a(w.n_ff), d(w.dim, 0.0f);
  if (w.has_pred()) {
    const int64_t rank = w.fc2.cols;
    std::vector<float> z(rank), sc(w.n_ff);
    w.fc1.apply_rows(e * rank, rank, x, z.data());
    for (float& v : z) v = std::max(v, 0.0f);
    w.fc2.apply_rows(e * w.n_ff, w.n_ff, z.data(), sc.data());
    rec.score.push_back(std::move(sc));
  }
  w.gate.apply_rows(e * w.n_ff, w.n_ff, h, g.data());
  w.up.apply_rows(e * w.n_ff, w.n_ff, h, u.data());
  for (int64_t i = 0; i < w.n_ff; ++i) {
    const float gi = g[i], ui = u[i];
    if (w.act == "silu") a[i] = gi / (1.0f + std::exp(-gi)) * ui;
    else if (w.act == "relu") a[i] = std::max(gi, 0.0f) * ui;
    else a[i] = std::max(gi, 0.0f) * std::max(ui, 0.0f);
  }
  if (!w.down.v.empty()) {
    w.down.apply_rows(e * w.dim, w.dim, a.data(), d.data());
  } else {  // neuron-major: the sum of the active neurons' down rows
    for (int64_t i = 0; i < w.n_ff; ++i)
      if (a[i] != 0.0f)
        for (int64_t k = 0; k < w.dim; ++k) d[k] += a[i] * w.down_t.row(e * w.n_ff + i)[k];
  }
  for (int64_t k = 0; k < w.dim; ++k) out[k] += weight * d[k];
  rec.gate.push_back(std::move(g));
  rec.up.push_back(std::move(u));
}

// The experts a router picks: the n_used largest logits, with llama.cpp's weights for Mixtral
// (the softmax over all experts, renormalized over the picked ones). Picked first-choice first.
inline std::vector<std::pair<int64_t, float>> route_ref(const std::vector<float>& logits, int64_t n_used) {
  std::vector<int64_t> order(logits.size());
  for (size_t e = 0; e < order.size(); ++e) order[e] = static_cast<int64_t>(e);
  std::partial_sort(order.begin(), order.begin() + n_used, order.end(),
                    [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  std::vector<std::pair<int64_t, float>> picked;
  double total = 0;
  for (int64_t k = 0; k < n_used; ++k) total += std::exp(double(logits[order[k]] - logits[order[0]]));
  for (int64_t k = 0; k < n_used; ++k)
    picked.emplace_back(order[k], static_cast<float>(std::exp(double(logits[order[k]] - logits[order[0]])) / total));
  return picked;
}

inline void rms_norm_ref(const float* x, const float* w, float* y, int64_t n, float eps) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  const float k = static_cast<float>(1.0 / std::sqrt(s / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * k * w[i];
}

inline void rope_ref(float* v, int64_t n_heads, int64_t hd, int64_t pos, float theta) {
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < hd; i += 2) {
      const double a = static_cast<double>(pos) * std::pow(theta, -static_cast<double>(i) / static_cast<double>(hd));
      const float c = static_cast<float>(std::cos(a)), s = static_cast<float>(std::sin(a));
      float* p = v + h * hd + i;
      const float x0 = p[0], x1 = p[1];
      p[0] = x0 * c - x1 * s;
      p[1] = x0 * s + x1 * c;
    }
}

// Runs `tokens` through the model (llama architecture, F32 arithmetic) and records the FFNs.
inline FfnTrace trace_ffn(const gguf::GgufFile& f, const std::vector<int32_t>& tokens) {
  const auto& md = f.metadata();
  const auto dim = static_cast<int64_t>(*md.get_uint("llama.embedding_length"));
  const auto n_layer = static_cast<int64_t>(*md.get_uint("llama.block_count"));
  const auto n_ff = static_cast<int64_t>(*md.get_uint("llama.feed_forward_length"));
  const auto n_head = static_cast<int64_t>(*md.get_uint("llama.attention.head_count"));
  const auto n_kv = static_cast<int64_t>(*md.get_uint("llama.attention.head_count_kv"));
  const float eps = static_cast<float>(*md.get_float("llama.attention.layer_norm_rms_epsilon"));
  const float theta = static_cast<float>(*md.get_float("llama.rope.freq_base"));
  const std::string act = md.get_string("llama.ffn_activation").value_or("silu");
  const auto n_used = static_cast<int64_t>(md.get_uint("llama.expert_used_count").value_or(0));
  const int64_t hd = dim / n_head, kvd = hd * n_kv, T = static_cast<int64_t>(tokens.size());
  const Matrix embd = load_matrix(f, "token_embd.weight");
  std::vector<std::vector<float>> x(static_cast<size_t>(T));
  for (int64_t p = 0; p < T; ++p) x[p].assign(embd.row(tokens[p]), embd.row(tokens[p]) + dim);
  FfnTrace tr;
  tr.gate.resize(n_layer), tr.up.resize(n_layer), tr.score.resize(n_layer), tr.router.resize(n_layer);
  tr.experts.resize(n_layer);
  std::vector<float> h(dim), q(dim), att(dim), o(dim);
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const Matrix an = load_matrix(f, p + "attn_norm.weight"), wq = load_matrix(f, p + "attn_q.weight"),
                 wk = load_matrix(f, p + "attn_k.weight"), wv = load_matrix(f, p + "attn_v.weight"),
                 wo = load_matrix(f, p + "attn_output.weight"), fn = load_matrix(f, p + "ffn_norm.weight");
    const bool moe = n_used > 0;
    const FfnWeights ffn = load_ffn(f, p, moe, n_ff, dim, act);
    Matrix router;
    if (moe) router = load_matrix(f, p + "ffn_gate_inp.weight");
    tr.experts[l].resize(static_cast<size_t>(router.rows));
    FfnRecord dense;
    std::vector<float> kc(T * kvd), vc(T * kvd);
    for (int64_t pos = 0; pos < T; ++pos) {  // attention, causal
      float* xp = x[pos].data();
      rms_norm_ref(xp, an.v.data(), h.data(), dim, eps);
      wq.apply(h.data(), q.data());
      wk.apply(h.data(), kc.data() + pos * kvd);
      wv.apply(h.data(), vc.data() + pos * kvd);
      rope_ref(q.data(), n_head, hd, pos, theta);
      rope_ref(kc.data() + pos * kvd, n_kv, hd, pos, theta);
      for (int64_t hh = 0; hh < n_head; ++hh) {
        const int64_t kvh = hh / (n_head / n_kv);
        std::vector<double> w(pos + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= pos; ++j) {
          double s = 0;
          for (int64_t i = 0; i < hd; ++i) s += double(q[hh * hd + i]) * kc[j * kvd + kvh * hd + i];
          w[j] = s / std::sqrt(double(hd));
          mx = std::max(mx, w[j]);
        }
        double tot = 0;
        for (auto& e : w) tot += (e = std::exp(e - mx));
        for (int64_t i = 0; i < hd; ++i) {
          double s = 0;
          for (int64_t j = 0; j <= pos; ++j) s += w[j] / tot * vc[j * kvd + kvh * hd + i];
          att[hh * hd + i] = static_cast<float>(s);
        }
      }
      wo.apply(att.data(), o.data());
      for (int64_t i = 0; i < dim; ++i) xp[i] += o[i];
      rms_norm_ref(xp, fn.v.data(), h.data(), dim, eps);
      if (!moe) {
        run_ffn(ffn, 0, xp, h.data(), 1.0f, xp, dense);
        continue;
      }
      // The picked experts' weighted outputs; their predictors all read the x before the FFN.
      std::vector<float> logits(router.rows), x_in(xp, xp + dim);
      router.apply(h.data(), logits.data());
      tr.router[l].push_back(logits);
      for (const auto& [e, weight] : route_ref(logits, n_used)) {
        auto& rec = tr.experts[l][static_cast<size_t>(e)];
        rec.positions.push_back(pos);
        run_ffn(ffn, e, x_in.data(), h.data(), weight, xp, rec);
      }
    }
    tr.gate[l] = std::move(dense.gate), tr.up[l] = std::move(dense.up), tr.score[l] = std::move(dense.score);
  }
  return tr;
}

}  // namespace ember::test
