#pragma once
// Pieces shared by the two sparse FFN kernels, sparse_ffn (rows addressed through MatrixViews, one
// fused pass per neuron) and SparseBundleFfn (bundles addressed by pointer, as they arrive from the
// neuron cache). Both must produce the same floats for the same active list, so the row dots, the
// down accumulation, the chunking of the list and the reduction of the chunks live here, once.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/kernels/thread_pool.h"
#include "core/kernels/type_traits.h"
#include "core/sparse/ffn_activation.h"
#include "core/sparse/q4_0_prepared_dot.h"

namespace ember::sparse_parts {

// The active list is cut into at most kMaxChunks contiguous chunks whatever the thread count; each
// chunk sums its neurons into its own partial output in list order and the partials are added in
// chunk order, so results do not depend on the number of threads or on scheduling.
inline constexpr int64_t kMaxChunks = 8;
inline constexpr int64_t kMinChunkNeurons = 16;  // below this a chunk is not worth its partial's zeroing
inline constexpr int64_t kMinStrip = 64;         // reduction: output dims per strip at least
// Listed neurons computed together: their Q4_0 gate, then up rows through dot_q4_0_prepared_rows
// and their down rows through axpy_q4_0_rows. Rows at random addresses are latency-bound; 8 streams
// side by side keep more reads in flight than one (measurements: docs/performance.md).
inline constexpr int64_t kDotGroup = 8;
// While a group is computed, the first kGroupPrefetchBytes of each gate row of the next group are
// requested: each row starts at a random address, and its first lines would otherwise be waited
// for when the group starts (the hardware prefetcher follows a row once it streams). Kept next to
// RowsAhead's paced requests; sizes measured in docs/performance.md.
inline constexpr uint64_t kGroupPrefetchBytes = 256;
inline void prefetch_row_head(const void* row) {
  const auto* p = static_cast<const char*>(row);
  for (uint64_t b = 0; b < kGroupPrefetchBytes; b += 64) __builtin_prefetch(p + b);
}

inline int64_t chunk_count(int64_t n_active) {
  return std::clamp<int64_t>((n_active + kMinChunkNeurons - 1) / kMinChunkNeurons, 1, kMaxChunks);
}
inline int64_t chunk_begin(int64_t n_active, int64_t n_chunks, int64_t c) { return n_active * c / n_chunks; }

// x converted to the type the matrix's vec_dot expects (F32: x itself).
inline const void* convert_input(const KernelTraits& t, const float* x, int64_t n, std::vector<uint8_t>& buf) {
  if (t.vec_dot_type == GgmlType::F32) return x;
  kernel_traits(t.vec_dot_type)->from_float(x, buf.data(), n);
  return buf.data();
}

// Dot products of one matrix's rows with x: Q4_0 rows through the prepared-input kernel
// (q4_0_prepared_dot.h), every other type through its vec_dot on x converted once.
struct RowDot {
  const KernelTraits* traits = nullptr;
  const void* x = nullptr;              // converted input (vec_dot path)
  const Q4PreparedInput* q4 = nullptr;  // prepared input (Q4_0 path)
  float operator()(int64_t n, const uint8_t* row) const {
    return q4 != nullptr ? dot_q4_0_prepared(row, *q4) : traits->vec_dot(n, row, x);
  }
};

// out[0..n) += h * dequantize(row) for one neuron's whole down row.
void accumulate_down(const KernelTraits& dt, GgmlType type, int64_t n, float h, const uint8_t* row, float* out,
                     float* tmp);

// accumulate_down for `count` neurons in order (h[r], rows[r]); Q4_0 rows go through the
// multi-row axpy (the same floats, rows read side by side).
void accumulate_down_rows(const KernelTraits& dt, GgmlType type, int64_t n, const float* h, const void* const* rows,
                          int count, float* out, float* tmp);

// h[j] for n <= kDotGroup neurons with Q4_0 gate and up rows: gate dots together, ReLU-family
// neurons with gate <= 0 stop there (h = 0), up dots of the rest together. The same floats as one
// neuron at a time through RowDot.
// next_gates: the next group's gate rows, requested while this group's gate rows stream.
void activate_q4_0_group(FfnActivation act, const Q4PreparedInput& x, const void* const* gate_rows,
                         const void* const* up_rows, int64_t n, float* h, RowsAhead next_gates = {});

// Down rows waiting to be added, up to kDotGroup: add() in list order, flush() at the end; each
// full batch goes through accumulate_down_rows at once.
class DownBatch {
 public:
  DownBatch(const KernelTraits& dt, GgmlType type, int64_t n, float* out, float* tmp)
      : dt_(dt), type_(type), n_(n), out_(out), tmp_(tmp) {}
  void add(float h, const void* row) {
    h_[count_] = h;
    rows_[count_++] = row;
    if (count_ == kDotGroup) flush();
  }
  void flush() {
    accumulate_down_rows(dt_, type_, n_, h_, rows_, count_, out_, tmp_);
    count_ = 0;
  }

 private:
  const KernelTraits& dt_;
  GgmlType type_;
  int64_t n_;
  float* out_;
  float* tmp_;
  float h_[kDotGroup] = {};
  const void* rows_[kDotGroup] = {};
  int count_ = 0;
};

// out = partial 0 + partial 1 + ... (n_chunks partials of n floats, `stride` apart), in chunk
// order, strip by strip over the pool.
void reduce_partials(const float* partials, int64_t stride, int64_t n_chunks, int64_t n, float* out, ThreadPool& pool);

}  // namespace ember::sparse_parts
