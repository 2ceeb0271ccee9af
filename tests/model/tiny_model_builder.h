#pragma once
// Builds small llama GGUF files in code for the model tests: valid ones, and ones broken in one
// chosen way (a missing tensor, a wrong shape, absurd metadata).
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/gguf/gguf_writer.h"
#include "tests/support/test_vocab.h"

namespace ember::test {

struct TinyModelSpec {
  int64_t n_embd = 32, n_layer = 2, n_ff = 64, n_head = 4, n_head_kv = 2, n_vocab = 300;
  uint64_t block_count_override = 0;  // written instead of n_layer when non-zero
  std::string skip_tensor;            // leave this tensor out
  std::string misshape_tensor;        // give this tensor one row too many
  GgmlType matrix_type = GgmlType::F32;
  uint32_t seed = 1;
};

inline std::filesystem::path write_tiny_model(const TinyModelSpec& s, const std::string& file_name) {
  gguf::GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.embedding_length", static_cast<uint32_t>(s.n_embd));
  w.add_u64("llama.block_count", s.block_count_override ? s.block_count_override : static_cast<uint64_t>(s.n_layer));
  w.add_u32("llama.feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.add_u32("llama.attention.head_count", static_cast<uint32_t>(s.n_head));
  w.add_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.add_u32("llama.context_length", 128);
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  add_test_spm_vocab(w, s.n_vocab);

  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    bool norm;
  };
  const auto E = static_cast<uint64_t>(s.n_embd), F = static_cast<uint64_t>(s.n_ff),
             KV = static_cast<uint64_t>(s.n_embd / s.n_head * s.n_head_kv), V = static_cast<uint64_t>(s.n_vocab);
  std::vector<T> ts = {{"token_embd.weight", {E, V}, false}, {"output_norm.weight", {E}, true}};
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    ts.push_back({p + "attn_norm.weight", {E}, true});
    ts.push_back({p + "attn_q.weight", {E, E}, false});
    ts.push_back({p + "attn_k.weight", {E, KV}, false});
    ts.push_back({p + "attn_v.weight", {E, KV}, false});
    ts.push_back({p + "attn_output.weight", {E, E}, false});
    ts.push_back({p + "ffn_norm.weight", {E}, true});
    ts.push_back({p + "ffn_gate.weight", {E, F}, false});
    ts.push_back({p + "ffn_up.weight", {E, F}, false});
    ts.push_back({p + "ffn_down.weight", {F, E}, false});
  }
  std::vector<T> kept;
  for (T t : ts) {
    if (t.name == s.skip_tensor) continue;
    if (t.name == s.misshape_tensor) t.ne.back() += 1;
    kept.push_back(t);
  }
  for (const T& t : kept) w.add_tensor(t.name, t.norm ? GgmlType::F32 : s.matrix_type, t.ne);

  const auto path = std::filesystem::temp_directory_path() / (file_name + "-" + std::to_string(::getpid()) + ".gguf");
  w.begin(path.string());
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const T& t : kept) {
    uint64_t n = 1;
    for (uint64_t d : t.ne) n *= d;
    std::vector<float> data(n);
    for (float& x : data) x = t.norm ? 1.0f : normal(rng) / std::sqrt(static_cast<float>(t.ne[0]));
    w.write_tensor_data(data.data(), n * sizeof(float));
  }
  w.finish();
  return path;
}

}  // namespace ember::test
