#include "core/sparse/sparse_ffn.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/kernels/quant_blocks.h"
#include "core/kernels/type_traits.h"
#include "core/sparse/axpy.h"

namespace ember {
namespace {

constexpr int64_t kNeuronChunk = 32;  // phase 1 work unit: enough dot products to hide dispatch
constexpr int64_t kMinStrip = 64;     // phase 2: output dims per strip at least (a cache line x4)

// Listed rows lie far apart (a row or a bundle between neighbours): too far for the hardware
// prefetcher, so each loop asks for the rows a few entries ahead itself.
constexpr int64_t kPrefetchAhead = 4;

inline void prefetch_bytes(const uint8_t* p, uint64_t n) {
  for (uint64_t b = 0; b < n; b += 64) __builtin_prefetch(p + b);
}

const uint8_t* row_of(const MatrixView& m, int64_t i) {
  return static_cast<const uint8_t*>(m.data) + m.row_stride * static_cast<uint64_t>(i);
}

// x converted to the type the matrix's vec_dot expects (F32: x itself).
const void* convert_input(const KernelTraits& t, const float* x, int64_t n, std::vector<uint8_t>& buf) {
  if (t.vec_dot_type == GgmlType::F32) return x;
  kernel_traits(t.vec_dot_type)->from_float(x, buf.data(), n);
  return buf.data();
}

// Strip length: the output dims split among the threads, a multiple of the down type's block
// (quantized rows can only be dequantized whole blocks at a time).
int64_t strip_length(int64_t n_embd, int n_threads, uint32_t block) {
  const int64_t per_thread = (n_embd + n_threads - 1) / n_threads;
  int64_t len = std::max<int64_t>(per_thread, kMinStrip);
  len = (len + block - 1) / block * block;
  return std::min<int64_t>(len, (n_embd + block - 1) / block * block);
}

}  // namespace

void SparseFfnScratch::reserve(int64_t n_embd, int64_t n_ff, int n_threads) {
  const size_t act_bytes = static_cast<size_t>(n_embd) * 4 + 64;  // F32 is the widest vec_dot type
  x_gate.assign(act_bytes, 0);
  x_up.assign(act_bytes, 0);
  h.assign(static_cast<size_t>(n_ff), 0.0f);
  // Strips are at most n_embd rounded up to the largest block (256).
  strip_floats = (n_embd + 255) / 256 * 256;
  strips.assign(static_cast<size_t>(std::max(n_threads, 1)) * static_cast<size_t>(strip_floats), 0.0f);
}

int64_t sparse_ffn(const SparseFfnArgs& a, ThreadPool& pool, SparseFfnScratch& s) {
  const KernelTraits& gt = *kernel_traits(a.gate.type);
  const KernelTraits& ut = *kernel_traits(a.up.type);
  const KernelTraits& dt = *kernel_traits(a.down_rows.type);
  const int64_t E = a.gate.cols;
  const void* xg = a.gate_values ? nullptr : convert_input(gt, a.x, E, s.x_gate);
  const void* xu = convert_input(ut, a.x, E, s.x_up);
  const bool relu_family = is_relu_family(a.act);
  float* h = s.h.data();

  // Phase 1: activations of the listed neurons.
  const int64_t n_chunks = (a.n_active + kNeuronChunk - 1) / kNeuronChunk;
  pool.parallel_for(n_chunks, [&](int64_t chunk, int) {
    const int64_t end = std::min(a.n_active, (chunk + 1) * kNeuronChunk);
    const uint64_t gate_bytes = row_bytes(a.gate.type, static_cast<uint64_t>(E));
    const uint64_t up_bytes = row_bytes(a.up.type, static_cast<uint64_t>(E));
    for (int64_t k = chunk * kNeuronChunk; k < end; ++k) {
      const int32_t i = a.active[k];
      if (k + kPrefetchAhead < end) {
        const int32_t ahead = a.active[k + kPrefetchAhead];
        if (!a.gate_values) prefetch_bytes(row_of(a.gate, ahead), gate_bytes);
        prefetch_bytes(row_of(a.up, ahead), up_bytes);
      }
      const float g = a.gate_values ? a.gate_values[i] : gt.vec_dot(E, row_of(a.gate, i), xg);
      if (relu_family && !(g > 0.0f)) {  // activation is exactly 0 whatever up is
        h[k] = 0.0f;
        continue;
      }
      h[k] = neuron_activation(a.act, g, ut.vec_dot(E, row_of(a.up, i), xu));
    }
  });
  int64_t nonzero = 0;
  for (int64_t k = 0; k < a.n_active; ++k) nonzero += h[k] != 0.0f ? 1 : 0;

  // Phase 2: out = sum of h[k] * down_rows[active[k]], strip by strip.
  const int64_t strip = strip_length(E, pool.size(), dt.block_size);
  const int64_t n_strips = (E + strip - 1) / strip;
  const GgmlType down_type = a.down_rows.type;
  pool.parallel_for(n_strips, [&](int64_t si, int thread) {
    const int64_t e0 = si * strip, len = std::min(strip, E - e0);
    float* out = a.out + e0;
    std::memset(out, 0, static_cast<size_t>(len) * sizeof(float));
    float* tmp = s.strips.data() + static_cast<size_t>(thread) * static_cast<size_t>(s.strip_floats);
    const uint64_t offset = static_cast<uint64_t>(e0 / dt.block_size) * dt.type_size;
    const int64_t convert_len = (len + dt.block_size - 1) / dt.block_size * dt.block_size;
    const uint64_t slice_bytes = static_cast<uint64_t>(convert_len / dt.block_size) * dt.type_size;
    for (int64_t k = 0; k < a.n_active; ++k) {
      if (k + kPrefetchAhead < a.n_active && h[k + kPrefetchAhead] != 0.0f) {
        prefetch_bytes(row_of(a.down_rows, a.active[k + kPrefetchAhead]) + offset, slice_bytes);
      }
      if (h[k] == 0.0f) continue;
      const uint8_t* row = row_of(a.down_rows, a.active[k]) + offset;
      if (down_type == GgmlType::F32) {
        axpy(len, h[k], reinterpret_cast<const float*>(row), out);
      } else if (down_type == GgmlType::F16) {
        axpy_f16(len, h[k], reinterpret_cast<const uint16_t*>(row), out);
      } else if (down_type == GgmlType::Q4_0) {  // fused dequantize + accumulate, no temporary
        axpy_q4_0(len / kQK4_0, h[k], row, out);  // quantized rows hold whole blocks: len % 32 == 0
      } else if (down_type == GgmlType::Q8_0) {
        axpy_q8_0(len / kQK8_0, h[k], row, out);
      } else {  // other quantized rows (ffn_down_t from a file): dequantize the slice, then accumulate
        dt.to_float(row, tmp, convert_len);
        axpy(len, h[k], tmp, out);
      }
    }
  });
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
