#pragma once
// Writes tiny llama GGUF models for the sparse tests: a chosen FFN activation, optional PowerInfer
// predictor tensors (exact or random), optional ffn_down_t, and predictor defects on request
// (a wrong shape, a rank mismatch, an unsupported type, a layer without them).
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/gguf/gguf_writer.h"
#include "tests/support/test_vocab.h"
#include "core/kernels/type_traits.h"
#include "core/sparse/ffn_activation.h"

namespace ember::test {

enum class PredictorKind {
  None,
  Exact,   // fc1 = the gate matrix, fc2 = identity: scores = relu(gate . x), > 0 exactly where
           // the gate is (ffn_norm weights are 1, so the norm only scales x by a positive factor)
  Random,  // random fc1/fc2 of rank `rank`
};

struct SparseModelSpec {
  int64_t n_embd = 64, n_layer = 2, n_ff = 256, n_head = 4, n_head_kv = 2, n_vocab = 300;
  FfnActivation act = FfnActivation::ReLU;
  GgmlType matrix_type = GgmlType::F32;
  PredictorKind predictor = PredictorKind::None;
  GgmlType predictor_type = GgmlType::F32;
  int64_t rank = 32;                  // Random predictors
  bool down_t = false;                // write blk.N.ffn_down_t.weight (the transposed ffn_down)
  GgmlType down_t_type = GgmlType::F32;
  bool pwri = true;                   // PWRI magic when a predictor is written
  float sparse_threshold = NAN;       // powerinfer.sparse_threshold when not NaN
  // Defects:
  std::string skip_tensor;            // leave this tensor out
  std::string reshape_tensor;         // give this tensor's last dimension one more
  std::string retype_tensor;          // write this tensor as `retype` instead
  GgmlType retype = GgmlType::Q6_K;
  uint32_t seed = 7;
};

inline std::filesystem::path write_sparse_model(const SparseModelSpec& s, const std::string& file_name) {
  gguf::GgufWriter w;
  const bool with_pred = s.predictor != PredictorKind::None;
  if (with_pred && s.pwri) w.set_powerinfer_magic(true);
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.embedding_length", static_cast<uint32_t>(s.n_embd));
  w.add_u32("llama.block_count", static_cast<uint32_t>(s.n_layer));
  w.add_u32("llama.feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.add_u32("llama.attention.head_count", static_cast<uint32_t>(s.n_head));
  w.add_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.add_u32("llama.context_length", 256);
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_string("llama.ffn_activation", activation_name(s.act));
  if (!std::isnan(s.sparse_threshold)) w.add_f32("powerinfer.sparse_threshold", s.sparse_threshold);
  add_test_spm_vocab(w, s.n_vocab);

  enum class Kind { Norm, Matrix, Gate, Identity, Transposed };
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    Kind kind;
    GgmlType type;
    int64_t layer = -1;
  };
  const auto E = static_cast<uint64_t>(s.n_embd), F = static_cast<uint64_t>(s.n_ff),
             KV = static_cast<uint64_t>(s.n_embd / s.n_head * s.n_head_kv), V = static_cast<uint64_t>(s.n_vocab);
  const GgmlType M = s.matrix_type;
  std::vector<T> ts = {{"token_embd.weight", {E, V}, Kind::Matrix, M}, {"output_norm.weight", {E}, Kind::Norm, GgmlType::F32}};
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    ts.push_back({p + "attn_norm.weight", {E}, Kind::Norm, GgmlType::F32, l});
    ts.push_back({p + "attn_q.weight", {E, E}, Kind::Matrix, M, l});
    ts.push_back({p + "attn_k.weight", {E, KV}, Kind::Matrix, M, l});
    ts.push_back({p + "attn_v.weight", {E, KV}, Kind::Matrix, M, l});
    ts.push_back({p + "attn_output.weight", {E, E}, Kind::Matrix, M, l});
    ts.push_back({p + "ffn_norm.weight", {E}, Kind::Norm, GgmlType::F32, l});
    ts.push_back({p + "ffn_gate.weight", {E, F}, Kind::Gate, M, l});
    ts.push_back({p + "ffn_up.weight", {E, F}, Kind::Matrix, M, l});
    ts.push_back({p + "ffn_down.weight", {F, E}, Kind::Matrix, M, l});
    if (s.predictor == PredictorKind::Exact) {
      ts.push_back({p + "fc1.weight", {E, F}, Kind::Gate, s.predictor_type, l});
      ts.push_back({p + "fc2.weight", {F, F}, Kind::Identity, s.predictor_type, l});
    } else if (s.predictor == PredictorKind::Random) {
      const auto r = static_cast<uint64_t>(s.rank);
      ts.push_back({p + "fc1.weight", {E, r}, Kind::Matrix, s.predictor_type, l});
      ts.push_back({p + "fc2.weight", {r, F}, Kind::Matrix, s.predictor_type, l});
    }
    if (s.down_t) ts.push_back({p + "ffn_down_t.weight", {E, F}, Kind::Transposed, s.down_t_type, l});
  }
  std::vector<T> kept;
  for (T t : ts) {
    if (t.name == s.skip_tensor) continue;
    if (t.name == s.reshape_tensor) t.ne.back() += 1;
    if (t.name == s.retype_tensor) t.type = s.retype;
    kept.push_back(t);
  }
  for (const T& t : kept) w.add_tensor(t.name, t.type, t.ne);

  // Values: every layer's gate (and the exact predictor's fc1) must be the same numbers, and the
  // transposed down the same as down, so values are drawn per (seed, layer, role) deterministically.
  auto draw = [&](const std::string& role, int64_t layer, uint64_t n, float scale) {
    std::mt19937 rng(s.seed * 1000003u + static_cast<uint32_t>(layer + 1) * 7919u +
                     static_cast<uint32_t>(std::hash<std::string>{}(role) & 0xffff));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng) * scale;
    return v;
  };
  const auto path = std::filesystem::temp_directory_path() / (file_name + "-" + std::to_string(::getpid()) + ".gguf");
  w.begin(path.string());
  for (const T& t : kept) {
    uint64_t n = 1;
    for (uint64_t d : t.ne) n *= d;
    std::vector<float> data;
    const float scale = 1.0f / std::sqrt(static_cast<float>(t.ne[0]));
    switch (t.kind) {
      case Kind::Norm: data.assign(n, 1.0f); break;
      case Kind::Matrix: data = draw(t.name, t.layer, n, scale); break;
      case Kind::Gate: data = draw("gate", t.layer, n, scale); break;
      case Kind::Identity:
        data.assign(n, 0.0f);
        for (uint64_t i = 0; i < t.ne[1] && i < t.ne[0]; ++i) data[i * t.ne[0] + i] = 1.0f;
        break;
      case Kind::Transposed: {
        const std::string down = "blk." + std::to_string(t.layer) + ".ffn_down.weight";
        const std::vector<float> d = draw(down, t.layer, F * E, 1.0f / std::sqrt(static_cast<float>(F)));
        data.assign(n, 0.0f);
        for (uint64_t e = 0; e < E; ++e)
          for (uint64_t i = 0; i < F && i < t.ne[1]; ++i) data[i * E + e] = d[e * F + i];
        break;
      }
    }
    if (t.type == GgmlType::F32) {
      w.write_tensor_data(data.data(), n * sizeof(float));
    } else {
      std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes(t.type, t.ne[0]) * (n / t.ne[0])));
      const KernelTraits* traits = kernel_traits(t.type);
      if (traits) {
        for (uint64_t r = 0; r < n / t.ne[0]; ++r)
          traits->from_float(&data[r * t.ne[0]], bytes.data() + r * row_bytes(t.type, t.ne[0]),
                             static_cast<int64_t>(t.ne[0]));
      }
      w.write_tensor_data(bytes.data(), bytes.size());
    }
  }
  w.finish();
  return path;
}

}  // namespace ember::test
