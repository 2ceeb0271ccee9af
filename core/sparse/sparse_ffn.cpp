#include "core/sparse/sparse_ffn.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/kernels/quant_blocks.h"
#include "core/kernels/type_traits.h"
#include "core/sparse/axpy.h"
#include "core/sparse/q4_0_prepared_dot.h"
#include "core/sparse/sparse_ffn_parts.h"

namespace ember {
namespace sparse_parts {

void accumulate_down(const KernelTraits& dt, GgmlType type, int64_t n, float h, const uint8_t* row, float* out,
                     float* tmp) {
  switch (type) {
    case GgmlType::F32: axpy(n, h, reinterpret_cast<const float*>(row), out); return;
    case GgmlType::F16: axpy_f16(n, h, reinterpret_cast<const uint16_t*>(row), out); return;
    case GgmlType::Q4_0: axpy_q4_0(n / kQK4_0, h, row, out); return;  // fused dequantize + accumulate
    case GgmlType::Q8_0: axpy_q8_0(n / kQK8_0, h, row, out); return;
    default:  // other quantized rows (ffn_down_t from a file): dequantize, then accumulate
      dt.to_float(row, tmp, n);
      axpy(n, h, tmp, out);
  }
}

void accumulate_down_rows(const KernelTraits& dt, GgmlType type, int64_t n, const float* h, const void* const* rows,
                          int count, float* out, float* tmp) {
  if (type == GgmlType::Q4_0) {
    axpy_q4_0_rows(n / kQK4_0, h, rows, count, out);
    return;
  }
  for (int r = 0; r < count; ++r) accumulate_down(dt, type, n, h[r], static_cast<const uint8_t*>(rows[r]), out, tmp);
}

void activate_q4_0_group(FfnActivation act, const Q4PreparedInput& x, const void* const* gate_rows,
                         const void* const* up_rows, int64_t n, float* h, RowsAhead next_gates) {
  float g[kDotGroup], u[kDotGroup];
  const void* open_up[kDotGroup];
  const bool relu = is_relu_family(act);
  dot_q4_0_prepared_rows(gate_rows, static_cast<int>(n), x, g, next_gates);
  int n_open = 0;
  for (int64_t j = 0; j < n; ++j) {
    if (!relu || g[j] > 0.0f) open_up[n_open++] = up_rows[j];
  }
  dot_q4_0_prepared_rows(open_up, n_open, x, u);
  for (int64_t j = 0, o = 0; j < n; ++j) h[j] = (!relu || g[j] > 0.0f) ? neuron_activation(act, g[j], u[o++]) : 0.0f;
}

void reduce_partials(const float* partials, int64_t stride, int64_t n_chunks, int64_t n, float* out, ThreadPool& pool) {
  const int64_t strip = std::max<int64_t>((n + pool.size() - 1) / pool.size(), kMinStrip);
  pool.parallel_for((n + strip - 1) / strip, [&](int64_t si, int) {
    const int64_t e0 = si * strip, e1 = std::min(n, e0 + strip);
    std::memcpy(out + e0, partials + e0, static_cast<size_t>(e1 - e0) * sizeof(float));
    for (int64_t c = 1; c < n_chunks; ++c) {
      const float* p = partials + c * stride;
      for (int64_t e = e0; e < e1; ++e) out[e] += p[e];
    }
  });
}

}  // namespace sparse_parts

namespace {

using namespace sparse_parts;

// A neuron's rows lie far from the previous neuron's: too far for the hardware prefetcher to
// guess, so the loop asks for the gate row kPrefetchAhead neurons ahead while it computes the
// current one. Only the gate: its up and down rows are needed only when that gate is positive
// (relu family), and once the gate row streams in, the hardware prefetcher follows into the up
// row of a pack's bundle. (Measured with ember-sparse-kernel-bench on mistral-7b shapes: asking
// for whole bundles, or for rows further ahead, was no faster.)
constexpr int64_t kPrefetchAhead = 2;

inline void prefetch_bytes(const uint8_t* p, uint64_t n) {
  for (uint64_t b = 0; b < n; b += 64) __builtin_prefetch(p + b);
}

const uint8_t* row_of(const MatrixView& m, int64_t i) {
  return static_cast<const uint8_t*>(m.data) + m.row_stride * static_cast<uint64_t>(i);
}

}  // namespace

void SparseFfnScratch::reserve(int64_t n_embd, int64_t n_ff, int n_threads) {
  const size_t act_bytes = static_cast<size_t>(n_embd) * 4 + 64;  // F32 is the widest vec_dot type
  x_gate.assign(act_bytes, 0);
  x_up.assign(act_bytes, 0);
  x_q4.reserve(n_embd);
  h.assign(static_cast<size_t>(n_ff), 0.0f);
  // Rows dequantize whole blocks: n_embd rounded up to the largest block (256).
  row_floats = (n_embd + 255) / 256 * 256;
  tmp.assign(static_cast<size_t>(std::max(n_threads, 1)) * static_cast<size_t>(row_floats), 0.0f);
  partials.assign(static_cast<size_t>(kMaxChunks) * static_cast<size_t>(row_floats), 0.0f);
}

uint64_t SparseFfnScratch::bytes() const {
  return x_gate.size() + x_up.size() + x_q4.qs.size() + (x_q4.d.size() + h.size() + tmp.size() + partials.size()) * 4 +
         x_q4.corr.size() * 4;
}

int64_t sparse_ffn(const SparseFfnArgs& a, ThreadPool& pool, SparseFfnScratch& s) {
  const KernelTraits& gt = *kernel_traits(a.gate.type);
  const KernelTraits& ut = *kernel_traits(a.up.type);
  const KernelTraits& dt = *kernel_traits(a.down_rows.type);
  const int64_t E = a.gate.cols;
  const bool q4_gate = a.gate.type == GgmlType::Q4_0 && !a.gate_values;
  const bool q4_up = a.up.type == GgmlType::Q4_0;
  if (q4_gate || q4_up) s.x_q4.prepare(a.x, E);
  RowDot gate_dot{&gt, nullptr, q4_gate ? &s.x_q4 : nullptr};
  RowDot up_dot{&ut, nullptr, q4_up ? &s.x_q4 : nullptr};
  if (!a.gate_values && !q4_gate) gate_dot.x = convert_input(gt, a.x, E, s.x_gate);
  if (!q4_up) up_dot.x = convert_input(ut, a.x, E, s.x_up);
  const bool relu_family = is_relu_family(a.act);
  const uint64_t gate_bytes = a.gate_values ? 0 : row_bytes(a.gate.type, static_cast<uint64_t>(E));
  const uint64_t up_bytes = row_bytes(a.up.type, static_cast<uint64_t>(E));
  float* h = s.h.data();

  const int64_t n_chunks = chunk_count(a.n_active);
  // One chunk writes the output directly; more sum into partials reduced below.
  auto chunk_out = [&](int64_t c) {
    return n_chunks == 1 ? a.out : s.partials.data() + static_cast<size_t>(c) * static_cast<size_t>(s.row_floats);
  };
  pool.parallel_for(n_chunks, [&](int64_t c, int thread) {
    const int64_t begin = chunk_begin(a.n_active, n_chunks, c), end = chunk_begin(a.n_active, n_chunks, c + 1);
    float* out = chunk_out(c);
    float* tmp = s.tmp.data() + static_cast<size_t>(thread) * static_cast<size_t>(s.row_floats);
    std::memset(out, 0, static_cast<size_t>(E) * sizeof(float));
    // The activation and down accumulation of listed neuron k, whose gate (and, when that is
    // positive or the activation is not relu-like, up) dot is known.
    auto finish = [&](int64_t k, int32_t i, float g, bool gate_open, float u) {
      const float hk = gate_open ? neuron_activation(a.act, g, u) : 0.0f;
      h[k] = hk;
      if (hk != 0.0f) accumulate_down(dt, a.down_rows.type, E, hk, row_of(a.down_rows, i), out, tmp);
    };
    auto prefetch_gate = [&](int64_t k) {
      if (k >= end) return;
      prefetch_bytes(row_of(a.gate_values ? a.up : a.gate, a.active[k]), a.gate_values ? up_bytes : gate_bytes);
    };
    int64_t k = begin;
    // Q4_0 gate and up: kDotGroup listed neurons at a time through the multi-row dot (the same floats
    // as one at a time, and the down rows are still added in list order), so their rows stream in
    // side by side instead of one after the other (the heads of the next group's gate rows are
    // requested meanwhile, see kGroupPrefetchBytes).
    if (q4_gate && q4_up) {
      DownBatch downs(dt, a.down_rows.type, E, out, tmp);
      for (; k + kDotGroup <= end; k += kDotGroup) {
        const void* next_gates[kDotGroup];
        int n_next = 0;
        for (int64_t j = k + kDotGroup; j < std::min(end, k + 2 * kDotGroup); ++j)
          next_gates[n_next++] = row_of(a.gate, a.active[j]);
        for (int j = 0; j < n_next; ++j) prefetch_row_head(next_gates[j]);
        const void* gate_rows[kDotGroup];
        const void* up_rows[kDotGroup];
        for (int64_t j = 0; j < kDotGroup; ++j) {
          gate_rows[j] = row_of(a.gate, a.active[k + j]);
          up_rows[j] = row_of(a.up, a.active[k + j]);
        }
        activate_q4_0_group(a.act, s.x_q4, gate_rows, up_rows, kDotGroup, h + k, RowsAhead{next_gates, n_next});
        for (int64_t j = 0; j < kDotGroup; ++j) {
          if (h[k + j] != 0.0f) downs.add(h[k + j], row_of(a.down_rows, a.active[k + j]));
        }
      }
      downs.flush();
    }
    for (; k < end; ++k) {
      const int32_t i = a.active[k];
      prefetch_gate(k + kPrefetchAhead);
      const float g = a.gate_values ? a.gate_values[i] : gate_dot(E, row_of(a.gate, i));
      const bool open = !relu_family || g > 0.0f;  // closed: the activation is exactly 0 whatever up is
      finish(k, i, g, open, open ? up_dot(E, row_of(a.up, i)) : 0.0f);
    }
  });
  int64_t nonzero = 0;
  for (int64_t k = 0; k < a.n_active; ++k) nonzero += h[k] != 0.0f ? 1 : 0;
  if (n_chunks == 1) return nonzero;

  reduce_partials(s.partials.data(), s.row_floats, n_chunks, E, a.out, pool);
  return nonzero;
}

int64_t sparse_ffn_reference(const SparseFfnArgs& a) {
  const KernelTraits& gt = *scalar_kernel_traits(a.gate.type);
  const KernelTraits& ut = *scalar_kernel_traits(a.up.type);
  const KernelTraits& dt = *scalar_kernel_traits(a.down_rows.type);
  const int64_t E = a.gate.cols;
  std::vector<uint8_t> xg(static_cast<size_t>(E) * 4 + 64), xu(xg.size());
  auto convert = [&](const KernelTraits& t, std::vector<uint8_t>& buf) -> const void* {
    if (t.vec_dot_type == GgmlType::F32) return a.x;
    scalar_kernel_traits(t.vec_dot_type)->from_float(a.x, buf.data(), E);
    return buf.data();
  };
  const void* xgp = convert(gt, xg);
  const void* xup = convert(ut, xu);
  std::vector<float> row(static_cast<size_t>(E));
  std::fill(a.out, a.out + E, 0.0f);
  int64_t nonzero = 0;
  for (int64_t k = 0; k < a.n_active; ++k) {
    const int32_t i = a.active[k];
    const float g = a.gate_values ? a.gate_values[i] : gt.vec_dot(E, row_of(a.gate, i), xgp);
    const float u = ut.vec_dot(E, row_of(a.up, i), xup);
    const float h = neuron_activation(a.act, g, u);
    if (h == 0.0f) continue;
    ++nonzero;
    dt.to_float(row_of(a.down_rows, i), row.data(), E);
    for (int64_t e = 0; e < E; ++e) a.out[e] += h * row[static_cast<size_t>(e)];
  }
  return nonzero;
}

}  // namespace ember
