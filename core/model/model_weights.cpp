#include "core/model/model_weights.h"

#include <stdexcept>
#include <string>

#include "core/kernels/type_traits.h"

namespace ember {
namespace {

std::string shape_string(const gguf::TensorInfo& t) {
  std::string s = "{";
  for (uint32_t i = 0; i < t.n_dims; ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
  return s + "}";
}

const gguf::TensorInfo& require(const gguf::GgufFile& file, const std::string& name) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (!t) throw std::runtime_error("model tensor '" + name + "' is missing");
  return *t;
}

void check_shape(const gguf::TensorInfo& t, int64_t ne0, int64_t ne1) {
  const bool ok = t.ne[0] == static_cast<uint64_t>(ne0) && t.ne[1] == static_cast<uint64_t>(ne1) &&
                  t.ne[2] == 1 && t.ne[3] == 1;
  if (!ok) {
    std::string expected = ne1 == 1 ? "{" + std::to_string(ne0) + "}"
                                    : "{" + std::to_string(ne0) + ", " + std::to_string(ne1) + "}";
    throw std::runtime_error("model tensor '" + t.name + "': shape " + shape_string(t) + ", expected " + expected);
  }
}

}  // namespace

ModelWeights::ModelWeights(const gguf::GgufFile& file, const ModelConfig& c, WeightLoad load, bool repack)
    : load_(load), repack_(repack) {
  token_embd = bind_matrix(file, "token_embd.weight", c.n_embd, c.n_vocab);
  output_norm = bind_vector(file, "output_norm.weight", c.n_embd);
  output = file.find_tensor("output.weight") ? bind_matrix(file, "output.weight", c.n_embd, c.n_vocab) : token_embd;
  layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = layers[static_cast<size_t>(i)];
    l.attn_norm = bind_vector(file, p + "attn_norm.weight", c.n_embd);
    l.wq = bind_matrix(file, p + "attn_q.weight", c.n_embd, c.n_embd_q());
    l.wk = bind_matrix(file, p + "attn_k.weight", c.n_embd, c.n_embd_kv());
    l.wv = bind_matrix(file, p + "attn_v.weight", c.n_embd, c.n_embd_kv());
    l.wo = bind_matrix(file, p + "attn_output.weight", c.n_embd_q(), c.n_embd);
    l.ffn_norm = bind_vector(file, p + "ffn_norm.weight", c.n_embd);
    l.ffn_gate = bind_matrix(file, p + "ffn_gate.weight", c.n_embd, c.n_ff);
    l.ffn_up = bind_matrix(file, p + "ffn_up.weight", c.n_embd, c.n_ff);
    l.ffn_down = bind_matrix(file, p + "ffn_down.weight", c.n_ff, c.n_embd);
  }
}

const void* ModelWeights::data_of(const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  resident_bytes_ += t.n_bytes;
  if (load_ == WeightLoad::Mmap) {
    maps_.push_back(file.map_tensor(t));
    return maps_.back().data();
  }
  buffers_.emplace_back(static_cast<size_t>(t.n_bytes), 64);
  file.read_tensor(t, buffers_.back().data());
  return buffers_.back().data();
}

MatrixView ModelWeights::bind_matrix(const gguf::GgufFile& file, const std::string& name, int64_t ne0, int64_t ne1) {
  const gguf::TensorInfo& t = require(file, name);
  check_shape(t, ne0, ne1);
  if (!kernel_traits(t.type)) {
    throw std::runtime_error("model tensor '" + name + "': type " + std::string(type_name(t.type)) +
                             " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)");
  }
  MatrixView m;
  m.type = t.type;
  m.cols = ne0;
  m.rows = ne1;
  m.row_stride = row_bytes(t.type, static_cast<uint64_t>(ne0));
  m.data = data_of(file, t);
  if (repack_) {
    std::vector<uint8_t> copy = repack_for_matmul(m);
    if (!copy.empty()) {
      repacked_bytes_ += copy.size();
      repacked_.push_back(std::move(copy));
      m.repacked = repacked_.back().data();  // vector's heap buffer does not move with the vector
    }
  }
  return m;
}

const float* ModelWeights::bind_vector(const gguf::GgufFile& file, const std::string& name, int64_t n) {
  const gguf::TensorInfo& t = require(file, name);
  check_shape(t, n, 1);
  if (t.type != GgmlType::F32) {
    throw std::runtime_error("model tensor '" + name + "': type " + std::string(type_name(t.type)) +
                             ", expected F32 (norm weights are always F32)");
  }
  return static_cast<const float*>(data_of(file, t));
}

}  // namespace ember
