#pragma once
// Writes tiny mixture-of-experts llama GGUF files for the MoE tests, in either of llama.cpp's
// layouts (stacked ffn_*_exps tensors, or one tensor per expert), as the same model when only the
// layout differs, and broken in one chosen way on request.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/gguf/gguf_writer.h"
#include "core/kernels/type_traits.h"
#include "tests/support/test_vocab.h"

namespace ember::test {

struct MoeModelSpec {
  int64_t n_embd = 64, n_layer = 2, n_ff = 96, n_head = 4, n_head_kv = 2, n_vocab = 300;
  int64_t n_expert = 4, n_expert_used = 2;
  bool stacked = true;             // ffn_*_exps (llama.cpp today) or ffn_*.E (older files)
  bool identical_experts = false;  // every expert the same FFN (then equal to dense_ffn's model)
  bool dense_ffn = false;          // write expert 0's FFN as a dense model instead (no router)
  GgmlType matrix_type = GgmlType::F32;
  GgmlType router_type = GgmlType::F32;
  float router_scale = 4.0f;       // router rows' std times sqrt(n_embd): decisive, varied routing
  std::string activation;          // llama.ffn_activation when not empty ("relu", "drelu")
  bool down_t = false;             // also write ffn_down_t (the transposed down of each expert)
  bool down = true;                // write ffn_down (false: down_t only, as sparse MoE files do)
  int64_t predictor_rank = 0;      // > 0: random predictors fc1/fc2 of this rank
  int64_t fc2_rank = 0;            // > 0: fc2's rank instead (a mismatch)
  // predictor_rank == n_ff: fc1 = the expert's gate, fc2 = identity, so the scores are the gate
  // of the residual (ffn_norm weights are 1: the norm only scales), > 0 exactly where the gate is.
  bool exact_predictor = false;
  // Defects:
  int64_t expert_count_key = -1;   // written instead of n_expert when >= 0
  int64_t expert_used_key = -1;    // written instead of n_expert_used when >= 0
  std::string skip_tensor;         // leave this tensor out
  std::string reshape_tensor;      // give this tensor's last dimension one more
  std::string unstack_tensor;      // write this stacked tensor per expert instead
  uint32_t seed = 3;
};

// Deletes a written model file at the end of a test.
struct RemoveOnExit {
  std::filesystem::path path;
  ~RemoveOnExit() { std::filesystem::remove(path); }
};

inline std::filesystem::path write_moe_model(const MoeModelSpec& s, const std::string& file_name) {
  gguf::GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.embedding_length", static_cast<uint32_t>(s.n_embd));
  w.add_u32("llama.block_count", static_cast<uint32_t>(s.n_layer));
  w.add_u32("llama.feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.add_u32("llama.attention.head_count", static_cast<uint32_t>(s.n_head));
  w.add_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.add_u32("llama.context_length", 256);
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  if (!s.dense_ffn) {
    w.add_u32("llama.expert_count", static_cast<uint32_t>(s.expert_count_key >= 0 ? s.expert_count_key : s.n_expert));
    w.add_u32("llama.expert_used_count",
              static_cast<uint32_t>(s.expert_used_key >= 0 ? s.expert_used_key : s.n_expert_used));
  }
  if (!s.activation.empty()) w.add_string("llama.ffn_activation", s.activation);
  add_test_spm_vocab(w, s.n_vocab);

  // A tensor is drawn from (role, layer, expert) so that both layouts hold the same numbers.
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    GgmlType type;
    std::string role;   // "norm" = all ones
    int64_t layer = -1;
    int64_t expert = -1;  // -1: all experts stacked along ne[2] (or no expert)
  };
  const auto E = static_cast<uint64_t>(s.n_embd), F = static_cast<uint64_t>(s.n_ff),
             KV = static_cast<uint64_t>(s.n_embd / s.n_head * s.n_head_kv), V = static_cast<uint64_t>(s.n_vocab),
             X = static_cast<uint64_t>(s.n_expert);
  const GgmlType M = s.matrix_type;
  std::vector<T> ts = {{"token_embd.weight", {E, V}, M, "embd"}, {"output_norm.weight", {E}, GgmlType::F32, "norm"}};
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    ts.push_back({p + "attn_norm.weight", {E}, GgmlType::F32, "norm", l});
    ts.push_back({p + "attn_q.weight", {E, E}, M, "q", l});
    ts.push_back({p + "attn_k.weight", {E, KV}, M, "k", l});
    ts.push_back({p + "attn_v.weight", {E, KV}, M, "v", l});
    ts.push_back({p + "attn_output.weight", {E, E}, M, "o", l});
    ts.push_back({p + "ffn_norm.weight", {E}, GgmlType::F32, "norm", l});
    if (s.dense_ffn) {
      ts.push_back({p + "ffn_gate.weight", {E, F}, M, "ffn_gate", l, 0});
      ts.push_back({p + "ffn_up.weight", {E, F}, M, "ffn_up", l, 0});
      ts.push_back({p + "ffn_down.weight", {F, E}, M, "ffn_down", l, 0});
      continue;
    }
    ts.push_back({p + "ffn_gate_inp.weight", {E, X}, s.router_type, "router", l});
    const auto R = static_cast<uint64_t>(s.predictor_rank), R2 = static_cast<uint64_t>(s.fc2_rank ? s.fc2_rank : s.predictor_rank);
    std::vector<std::pair<std::string, std::vector<uint64_t>>> parts = {{"ffn_gate", {E, F}}, {"ffn_up", {E, F}}};
    if (s.down) parts.push_back({"ffn_down", {F, E}});
    if (s.down_t) parts.push_back({"ffn_down_t", {E, F}});
    if (R > 0) parts.insert(parts.end(), {{"fc1", {E, R}}, {"fc2", {R2, F}}});
    for (const auto& [part, ne] : parts) {
      const std::string stacked_name = p + part + "_exps.weight";
      if (s.stacked && stacked_name != s.unstack_tensor) {
        ts.push_back({stacked_name, {ne[0], ne[1], X}, M, part, l});
      } else {
        for (int64_t e = 0; e < s.n_expert; ++e)
          ts.push_back({p + part + "." + std::to_string(e) + ".weight", ne, M, part, l, e});
      }
    }
  }
  ts.push_back({"output.weight", {E, V}, M, "output"});
  std::vector<T> kept;
  for (T t : ts) {
    if (t.name == s.skip_tensor) continue;
    if (t.name == s.reshape_tensor) t.ne.back() += 1;
    kept.push_back(t);
  }
  for (const T& t : kept) w.add_tensor(t.name, t.type, t.ne);

  auto draw = [&](const T& t, int64_t expert, uint64_t n) {
    const int64_t which = s.identical_experts ? 0 : expert;
    std::mt19937 rng(s.seed * 1000003u + static_cast<uint32_t>(t.layer + 1) * 7919u +
                     static_cast<uint32_t>(which + 1) * 104729u +
                     static_cast<uint32_t>(std::hash<std::string>{}(t.role) & 0xffff));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    float scale = 1.0f / std::sqrt(static_cast<float>(t.ne[0]));
    if (t.role == "router") scale *= s.router_scale;
    if (t.role == "embd") scale = 1.0f;
    std::vector<float> v(n);
    for (float& x : v) x = t.role == "norm" ? 1.0f : normal(rng) * scale;
    return v;
  };
  // down_t holds exactly the transpose of what ffn_down holds (drawn as ffn_down).
  auto draw_part = [&](const T& t, int64_t expert, uint64_t n) {
    if (s.exact_predictor && t.role == "fc1") {
      T gate = t;
      gate.role = "ffn_gate";
      return draw(gate, expert, n);
    }
    if (s.exact_predictor && t.role == "fc2") {
      std::vector<float> v(n, 0.0f);
      for (uint64_t i = 0; i < t.ne[1] && i < t.ne[0]; ++i) v[i * t.ne[0] + i] = 1.0f;
      return v;
    }
    if (t.role != "ffn_down_t") return draw(t, expert, n);
    T down = t;
    down.role = "ffn_down";
    down.ne = {F, E};
    const std::vector<float> d = draw(down, expert, F * E);
    std::vector<float> v(n);
    for (uint64_t e = 0; e < E; ++e)
      for (uint64_t i = 0; i < F; ++i) v[i * E + e] = d[e * F + i];
    return v;
  };
  const auto path = std::filesystem::temp_directory_path() / (file_name + "-" + std::to_string(::getpid()) + ".gguf");
  w.begin(path.string());
  for (const T& t : kept) {
    const bool stacked = t.ne.size() == 3;
    const uint64_t per = t.ne.size() >= 2 ? t.ne[0] * t.ne[1] : t.ne[0];  // one expert's (or the vector's) values
    std::vector<float> data;
    if (stacked) {
      for (uint64_t e = 0; e < t.ne[2]; ++e) {
        const std::vector<float> one = draw_part(t, static_cast<int64_t>(e), per);
        data.insert(data.end(), one.begin(), one.end());
      }
    } else {
      data = draw_part(t, t.expert, per);
    }
    if (t.type == GgmlType::F32) {
      w.write_tensor_data(data.data(), data.size() * sizeof(float));
      continue;
    }
    const uint64_t rows = data.size() / t.ne[0], rb = row_bytes(t.type, t.ne[0]);
    std::vector<uint8_t> bytes(static_cast<size_t>(rb * rows));
    for (uint64_t r = 0; r < rows; ++r)
      kernel_traits(t.type)->from_float(&data[r * t.ne[0]], bytes.data() + r * rb, static_cast<int64_t>(t.ne[0]));
    w.write_tensor_data(bytes.data(), bytes.size());
  }
  w.finish();
  return path;
}

}  // namespace ember::test
