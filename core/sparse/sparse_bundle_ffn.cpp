#include "core/sparse/sparse_bundle_ffn.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/kernels/type_traits.h"
#include "core/sparse/sparse_ffn_parts.h"

namespace ember {

using namespace sparse_parts;

void SparseBundleFfn::reserve(const BundleRowsLayout& layout, int64_t n_ff, int n_threads) {
  for (GgmlType t : {layout.gate_type, layout.up_type, layout.down_type}) {
    const KernelTraits* k = kernel_traits(t);
    if (k == nullptr || layout.n_embd <= 0 || layout.n_embd % k->block_size != 0) {
      throw std::invalid_argument("sparse bundle FFN: type " + std::string(type_name(t)) + " cannot hold rows of " +
                                  std::to_string(layout.n_embd) + " values");
    }
  }
  layout_ = layout;
  scratch_.reserve(layout.n_embd, n_ff, n_threads);
  bundles_.assign(static_cast<size_t>(n_ff), nullptr);
}

uint64_t SparseBundleFfn::bytes() const { return scratch_.bytes() + bundles_.size() * sizeof(void*); }

void SparseBundleFfn::begin(FfnActivation act, const float* x, int64_t n_active) {
  act_ = act;
  n_active_ = n_active;
  const int64_t E = layout_.n_embd;
  q4_gate_ = layout_.gate_type == GgmlType::Q4_0;
  q4_up_ = layout_.up_type == GgmlType::Q4_0;
  if (q4_gate_ || q4_up_) scratch_.x_q4.prepare(x, E);
  x_gate_ = q4_gate_ ? nullptr : convert_input(*kernel_traits(layout_.gate_type), x, E, scratch_.x_gate);
  x_up_ = q4_up_ ? nullptr : convert_input(*kernel_traits(layout_.up_type), x, E, scratch_.x_up);
}

void SparseBundleFfn::activate(int64_t k, const uint8_t* bundle) {
  const int64_t E = layout_.n_embd;
  // The same dots and the same early exit as sparse_ffn(), so h_k is the same float.
  const RowDot gate_dot{kernel_traits(layout_.gate_type), x_gate_, q4_gate_ ? &scratch_.x_q4 : nullptr};
  const RowDot up_dot{kernel_traits(layout_.up_type), x_up_, q4_up_ ? &scratch_.x_q4 : nullptr};
  bundles_[static_cast<size_t>(k)] = bundle;
  const float g = gate_dot(E, bundle);
  if (is_relu_family(act_) && !(g > 0.0f)) {
    scratch_.h[static_cast<size_t>(k)] = 0.0f;
    return;
  }
  scratch_.h[static_cast<size_t>(k)] = neuron_activation(act_, g, up_dot(E, bundle + layout_.up_offset));
}

void SparseBundleFfn::activate_group(const int64_t* ks, const uint8_t* const* bundles, int64_t n, RowsAhead next) {
  static_assert(kActivateGroup == kDotGroup);
  for (int64_t j = 0; j < n; ++j) bundles_[static_cast<size_t>(ks[j])] = bundles[j];
  if (!q4_gate_ || !q4_up_) {
    for (int64_t j = 0; j < n; ++j) activate(ks[j], bundles[j]);
    return;
  }
  const void* gate_rows[kDotGroup] = {};
  const void* up_rows[kDotGroup] = {};
  float h[kDotGroup] = {};
  for (int64_t j = 0; j < n; ++j) {
    gate_rows[j] = bundles[j];
    up_rows[j] = bundles[j] + layout_.up_offset;
  }
  activate_q4_0_group(act_, scratch_.x_q4, gate_rows, up_rows, n, h, next);
  for (int64_t j = 0; j < n; ++j) scratch_.h[static_cast<size_t>(ks[j])] = h[j];
}

template <bool kActivate>
int64_t SparseBundleFfn::sum_down(float* out, ThreadPool& pool) {
  const int64_t E = layout_.n_embd, n = n_active_;
  const KernelTraits& dt = *kernel_traits(layout_.down_type);
  const float* h = scratch_.h.data();
  const int64_t n_chunks = chunk_count(n);
  const auto stride = static_cast<size_t>(scratch_.row_floats);
  float* partials = scratch_.partials.data();
  pool.parallel_for(n_chunks, [&](int64_t c, int thread) {
    float* o = n_chunks == 1 ? out : partials + static_cast<size_t>(c) * stride;
    float* tmp = scratch_.tmp.data() + static_cast<size_t>(thread) * stride;
    std::memset(o, 0, static_cast<size_t>(E) * sizeof(float));
    const int64_t end = chunk_begin(n, n_chunks, c + 1);
    // The down rows of neurons [k0, k1) with non-zero h, in list order.
    DownBatch downs(dt, layout_.down_type, E, o, tmp);
    auto add_downs = [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        if (h[k] != 0.0f) downs.add(h[k], bundles_[static_cast<size_t>(k)] + layout_.down_offset);
      }
    };
    const int64_t begin = chunk_begin(n, n_chunks, c);
    if constexpr (kActivate) {
      // As sparse_ffn: kDotGroup neurons' gate and up dots together, then their down rows, in order.
      for (int64_t k = begin; k < end; k += kDotGroup) {
        const int64_t group = std::min(kDotGroup, end - k);
        const void* next[kDotGroup];  // a bundle starts with its gate row
        int n_next = 0;
        for (int64_t j = k + kDotGroup; j < std::min(end, k + 2 * kDotGroup); ++j)
          next[n_next++] = bundles_[static_cast<size_t>(j)];
        for (int j = 0; j < n_next; ++j) prefetch_row_head(next[j]);
        int64_t ks[kDotGroup];
        const uint8_t* bundles[kDotGroup];
        for (int64_t j = 0; j < group; ++j) {
          ks[j] = k + j;
          bundles[j] = bundles_[static_cast<size_t>(k + j)];
        }
        activate_group(ks, bundles, group, RowsAhead{next, n_next});
        add_downs(k, k + group);
      }
    } else {
      add_downs(begin, end);  // finish(): every neuron already activated
    }
    downs.flush();
  });
  int64_t nonzero = 0;
  for (int64_t k = 0; k < n; ++k) nonzero += h[k] != 0.0f ? 1 : 0;
  if (n_chunks > 1) reduce_partials(partials, scratch_.row_floats, n_chunks, E, out, pool);
  return nonzero;
}

int64_t SparseBundleFfn::finish(float* out, ThreadPool& pool) { return sum_down<false>(out, pool); }

int64_t SparseBundleFfn::run(float* out, ThreadPool& pool) { return sum_down<true>(out, pool); }

}  // namespace ember
