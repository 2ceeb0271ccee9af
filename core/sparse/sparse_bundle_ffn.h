#pragma once
// The sparse FFN of one token when each neuron's weights arrive as a bundle pointer rather than as
// rows of resident matrices: the neuron cache (core/cache) hands out resident bundles at once and
// missing ones as their reads complete, in no particular order, and the computation must keep up
// with them while the reads are in flight.
//
// So the work is split in two: activate(k, bundle) computes the activation h_k of the k-th listed
// neuron from its bundle (gate and up dots) as soon as the bundle is there, in any order, from any
// thread; finish() then sums the down columns h_k * down_k in list order, chunked exactly as
// sparse_ffn() chunks them. The floats are therefore those of sparse_ffn() on the same active list
// whatever the order of arrival, the budget or the thread count (tested).
//
// A bundle is [gate row | up row | down column] (docs/pack-format.md); the offsets come from the
// pack. Everything is sized by reserve(): no allocation per token.
#include <cstdint>
#include <vector>

#include "core/kernels/thread_pool.h"
#include "core/sparse/ffn_activation.h"
#include "core/sparse/q4_0_prepared_dot.h"
#include "core/sparse/sparse_ffn.h"
#include "core/tensor/ggml_type.h"

namespace ember {

struct BundleRowsLayout {
  GgmlType gate_type = GgmlType::F32, up_type = GgmlType::F32, down_type = GgmlType::F32;
  uint64_t up_offset = 0, down_offset = 0;  // inside a bundle (the gate row is at 0)
  int64_t n_embd = 0;
};

class SparseBundleFfn {
 public:
  // Throws std::invalid_argument when a type has no kernels or n_embd does not fit its blocks.
  void reserve(const BundleRowsLayout& layout, int64_t n_ff, int n_threads);
  uint64_t bytes() const;

  // Starts a token's layer: x (n_embd, normed) prepared for the dots; n_active neurons listed.
  void begin(FfnActivation act, const float* x, int64_t n_active);
  // h of the k-th listed neuron from its bundle (valid until finish()). Distinct k may run on
  // different threads at once.
  void activate(int64_t k, const uint8_t* bundle);
  // activate(ks[j], bundles[j]) for j < n, n <= kActivateGroup, with their dots computed together
  // (the same floats; more memory reads in flight). next: the bundles of the group the caller
  // activates next, requested while this group's gate rows stream.
  static constexpr int64_t kActivateGroup = 8;
  void activate_group(const int64_t* ks, const uint8_t* const* bundles, int64_t n, RowsAhead next = {});
  // out (n_embd) = sum over k in list order of h_k * down column of bundle k. Every k in
  // [0, n_active) must have been activated. Returns how many h_k were non-zero.
  int64_t finish(float* out, ThreadPool& pool);

  // When every listed bundle is already in memory (a cache hit for each): set_bundle() each, then
  // run() does activate() and finish() in one pass per neuron with the bundles ahead prefetched,
  // as sparse_ffn() does; the same floats as the two-phase path.
  void set_bundle(int64_t k, const uint8_t* bundle) { bundles_[static_cast<size_t>(k)] = bundle; }
  int64_t run(float* out, ThreadPool& pool);

 private:
  // The down sum in list order, chunked as sparse_ffn(); kActivate: also activate each neuron first.
  template <bool kActivate>
  int64_t sum_down(float* out, ThreadPool& pool);

  BundleRowsLayout layout_;
  FfnActivation act_ = FfnActivation::SiLU;
  int64_t n_active_ = 0;
  bool q4_gate_ = false, q4_up_ = false;
  const void* x_gate_ = nullptr;
  const void* x_up_ = nullptr;
  SparseFfnScratch scratch_;                 // converted inputs, h, partials, per-thread rows
  std::vector<const uint8_t*> bundles_;      // (n_ff) bundle of the k-th listed neuron
};

}  // namespace ember
