#pragma once
// Keys and values of every past position, per layer, in F16 (as llama.cpp keeps them by default).
// Layout per layer: [n_ctx][n_head_kv * head_dim] for both K and V, so one position of one KV head
// is a contiguous head_dim run, which the attention kernel streams.
#include <cstdint>
#include <vector>

#include "core/model/model_config.h"

namespace ember {

class KvCache {
 public:
  KvCache(const ModelConfig& config, int64_t n_ctx);

  int64_t n_ctx() const { return n_ctx_; }
  int64_t row_elements() const { return row_; }
  uint64_t bytes() const { return static_cast<uint64_t>(k_.size() + v_.size()) * sizeof(uint16_t); }

  uint16_t* k(int64_t layer, int64_t pos) { return k_.data() + (layer * n_ctx_ + pos) * row_; }
  uint16_t* v(int64_t layer, int64_t pos) { return v_.data() + (layer * n_ctx_ + pos) * row_; }

 private:
  int64_t n_ctx_;
  int64_t row_;
  std::vector<uint16_t> k_;
  std::vector<uint16_t> v_;
};

}  // namespace ember
