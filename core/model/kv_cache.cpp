#include "core/model/kv_cache.h"

#include <stdexcept>
#include <string>

namespace ember {

KvCache::KvCache(const ModelConfig& c, int64_t n_ctx) : n_ctx_(n_ctx), row_(c.n_embd_kv()) {
  if (n_ctx <= 0) throw std::invalid_argument("context size must be positive, got " + std::to_string(n_ctx));
  // Both factors are bounded by ConfigLimits and the context cap, so this cannot overflow.
  const auto elements = static_cast<size_t>(c.n_layer) * static_cast<size_t>(n_ctx) * static_cast<size_t>(row_);
  k_.assign(elements, 0);
  v_.assign(elements, 0);
}

}  // namespace ember
