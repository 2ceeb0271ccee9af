#pragma once
// A pack's FFN layers run with their bundles on storage, under a memory budget.
//
// At load: plan the budget (core/cache/budget_planner.h: the weights that stay resident, each
// layer's hot prefix by the pack's activation frequencies, a pool of cold slots), read the hot
// prefixes in large sequential reads, open the pack for O_DIRECT reads with the chosen backend.
//
// Sparse decode step (one token, the predictor's active list): the cache hands out the resident
// bundles at once and reads the missing ones in coalesced batches; the resident neurons are
// computed while the reads are in flight, each arriving bundle as its read completes, and the down
// projection is summed in list order (core/sparse/sparse_bundle_ffn.h), so the output is the
// all-in-RAM pack's bit for bit at every budget.
//
// Dense step (a prompt batch, or a decode step without a sparse mode): every neuron is needed, so
// the layer's bundles are streamed past the cache in large sequential reads, double-buffered
// (chunk j+1 is read while chunk j is computed); chunks inside the hot prefix are used in place.
// Chunk boundaries do not depend on the budget (multiples of 64 neurons), and gate/up/down use the
// same kernels as the all-in-RAM pack with repacking off: the same floats again.
//
// One OffloadedFfn serves every context of a model (the cache stays warm across requests); the
// calls serialise on a mutex, so contexts on different threads take turns layer by layer.
// Nothing allocates per step.
//
// Errors: once constructed, every failure to read the pack (an I/O error, a pack truncated while
// it is served, the reader itself failing) leaves a method as cache::FetchError, never io::IoError,
// and the object stays usable: the next call reads again.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/cache/activation_tracker.h"
#include "core/cache/budget_planner.h"
#include "core/cache/bundle_fetcher.h"
#include "core/cache/neuron_cache.h"
#include "core/cache/tracker_file.h"
#include "core/kernels/matmul.h"
#include "core/cache/offload_stats.h"
#include "core/kernels/thread_pool.h"
#include "core/sparse/ffn_activation.h"
#include "core/sparse/sparse_bundle_ffn.h"
#include "io/direct_file.h"
#include "io/io_backend.h"

namespace ember {

// What the neuron cache needs of a pack: plain numbers and views, so that core/cache does not
// depend on the model code that binds them (core/model/model.cpp fills it from ModelWeights).
// The pointers stay valid as long as the model's weights.
struct OffloadedPack {
  std::string path;
  int64_t n_layer = 0, n_embd = 0, n_ff = 0;
  FfnActivation activation = FfnActivation::SiLU;
  BundleRowsLayout layout;         // row types and offsets inside a bundle
  uint64_t bundle_bytes = 0;
  std::vector<uint64_t> bundles_offset;     // per layer: file offset of blk.N.ffn_bundles
  std::vector<const float*> neuron_freq;    // per layer: n_ff profiled frequencies, hottest first
  std::vector<const int32_t*> neuron_perm;  // per layer: n_ff source neuron of each bundle
  // Layers one decode step reads at once (a mixture's routed experts, each a layer of the cache):
  // how many prefetch() may read ahead for together.
  uint32_t layers_per_step = 1;
  MatrixView token_embd;           // type and row stride; data == nullptr: read from storage
  uint64_t token_embd_offset = 0;  // file offset of the embedding table
  uint64_t resident_bytes = 0;     // weights bound in memory (the plan's resident bytes)
};

struct OffloadOptions {
  uint64_t budget_bytes = 0;  // 0: off (the whole pack in RAM)
  io::IoBackend backend = io::IoBackend::Auto;
  io::ReaderOptions reader;               // queue depth, in-flight capacity, pread threads
  uint32_t max_read_bytes = 128u << 10;   // coalesced cold-bundle reads stop here
  uint32_t stream_chunk_bytes = 4u << 20; // dense steps: bytes of bundles per streamed chunk
  // Read-only: open the pack buffered instead of O_DIRECT (tests on file systems without it use
  // the fallback anyway; this is for callers that want the page cache).
  bool buffered = false;
  // Tests: wraps the reader (e.g. in an io::FaultInjectingReader) before anything is read.
  std::function<std::unique_ptr<io::BatchReader>(std::unique_ptr<io::BatchReader>)> wrap_reader;
  // Online adaptation: half-life in tokens of the live activation counts (ActivationTracker).
  double activation_half_life = cache::kDefaultHalfLifeTokens;
  // Cold slots for about this many tokens' worth of misses (cache::BudgetPlanInput::locality_tokens).
  double cold_locality_tokens = 6.0;
  // Before layer L's attention in a decode step, predict layer L's active set from the residual
  // entering the layer and start reading its missing bundles, so the reads overlap the attention
  // (and the resident neurons' compute). Costs one more predictor evaluation per layer; measured
  // +8-11 % decode tokens/s at 50 % and 25 % budgets on mistral-7b (bench/prefetch_ab.sh).
  // Unset: on when a decode step runs one layer of the cache at a time (dense packs), off when it
  // runs several (a mixture's routed experts: each needs its own second predictor evaluation, which
  // cost more than the overlapped reads saved on the Mixtral shape, docs/performance.md).
  std::optional<bool> prefetch;
  // Load only (the constructor): runs between the hot-neuron reads and may throw to abandon the
  // load (ModelLoadOptions::checkpoint); replan() never calls it. Empty: none.
  std::function<void()> checkpoint;
};

class OffloadedFfn {
 public:
  // `pack` describes weights bound with offload_bundles. Throws cache::BudgetTooSmall (with the
  // minimum) when the budget cannot hold the resident weights plus one layer's worth of cold slots,
  // io::IoError when the pack cannot be opened or io_uring was asked for and does not work, and
  // cache::FetchError when the hot prefixes cannot be read.
  OffloadedFfn(const OffloadedPack& pack, const OffloadOptions& options);
  OffloadedFfn(const OffloadedFfn&) = delete;
  OffloadedFfn& operator=(const OffloadedFfn&) = delete;

  // out (n_embd) = the FFN of one token (x: normed input) over the listed bundle numbers.
  // `kernel` is the caller's (per context) and reserved with layout(). Throws cache::FetchError
  // on a failed read (the cache stays consistent; the next step works).
  void sparse_step(int64_t layer, const float* x, const int32_t* active, int64_t n_active, ThreadPool& pool,
                   SparseBundleFfn& kernel, float* out);

  // Starts reading the listed layers' predicted bundles in one batch (prefetch; see
  // BundleFetcher::prefetch): best effort, the next sparse_step() of each uses what arrived. At
  // most OffloadedPack::layers_per_step layers. Never throws for I/O.
  struct Predicted {
    int64_t layer = 0;
    const int32_t* ids = nullptr;
    int64_t n = 0;
  };
  void prefetch(std::span<const Predicted> layers);
  void prefetch(int64_t layer, const int32_t* predicted, int64_t n_predicted) {
    const Predicted one{layer, predicted, n_predicted};
    prefetch(std::span<const Predicted>(&one, 1));
  }
  bool prefetch_enabled() const { return prefetch_; }

  // The dense FFN of n tokens: x (n rows of n_embd, normed), gate/up: n rows of n_ff floats of
  // scratch (row stride n_ff), out: n rows of n_embd (overwritten). Throws cache::FetchError.
  void dense_step(int64_t layer, const float* x, int64_t n, float* gate, float* up, float* out, ThreadPool& pool,
                  MatmulScratch& scratch);

  // out (n_embd) = token's embedding, read from storage (ModelWeights::token_embd_offset) when the
  // table is not resident, through the same reader as the bundles. Thread-safe (serialised on the
  // mutex): prompt tokens are embedded on the pool. Throws cache::FetchError on a failed read.
  void embed(int32_t token, float* out);

  BundleRowsLayout layout() const { return layout_; }
  const cache::BudgetPlan& plan() const { return plan_; }
  uint64_t budget_bytes() const { return budget_; }
  uint64_t weights_bytes() const { return weights_bytes_; }     // resident weights (the plan's resident)
  // Staging + stream buffers: scratch outside the budget, like the KV cache.
  uint64_t io_buffer_bytes() const { return io_buffer_bytes_; }
  std::string backend_name() const;
  uint32_t queue_depth() const;
  bool direct_io() const { return file_.is_direct(); }
  // Offset and length alignment of the cold reads (io::DirectFile::alignment(): 1 when buffered).
  uint64_t read_alignment() const { return file_.alignment(); }
  // Lines for the caller to log: io_uring fallback, no O_DIRECT, unregistered buffers.
  const std::vector<std::string>& warnings() const { return warnings_; }

  OffloadStats stats() const;
  void reset_stats();

  // Online adaptation. Every sparse step records its active list in a tracker with
  // exponential decay, seeded with the pack's offline frequencies. replan() plans the budget again
  // from the live frequencies and, when the hot prefixes change, rebuilds the cache (the old one is
  // freed first, so memory never holds both) and reads the new hot prefixes: call it between
  // requests, it takes a while. Returns true when the plan changed. Throws like the constructor;
  // after a failed read of the new hot prefixes the cache is left working with no hot neurons
  // (correct, slower) and a later replan() can try again.
  bool replan();
  uint64_t replans() const;
  // Memory-pressure elasticity: plans the cache for a budget of `bytes` (0: the one it was built
  // with; raised to the plan's minimum_bytes) from the live frequencies and rebuilds it when the
  // plan changes, as replan() does (the old cache freed first; a failed read leaves it without hot
  // neurons and throws). Results never change, only speed. Returns the budget now in force. Call
  // between steps.
  uint64_t set_budget(uint64_t bytes);
  uint64_t configured_budget_bytes() const { return configured_budget_; }
  // Saves the live counts atomically (cache/tracker_file.h) / replaces them with a saved file's
  // (throws std::runtime_error when it was saved for another pack).
  void save_activations(const std::string& path) const;
  void load_activations(const std::string& path);
  // Which pack the counts belong to: the file size and every layer's neuron permutation.
  uint64_t pack_fingerprint() const { return fingerprint_; }

  // Tests: throws std::logic_error when the cache's invariants do not hold or a fetch is pending.
  void check_consistency() const;

 private:
  struct StreamBuffer {
    io::AlignedBuffer bytes;
    int64_t chunk = -1;           // the chunk it holds or is reading
    const uint8_t* data = nullptr;
    uint32_t pending = 0;         // reads in flight
  };
  int64_t chunk_neurons() const { return chunk_neurons_; }
  cache::BudgetPlanInput plan_input(bool live) const;
  cache::TrackerIdentity tracker_identity() const;
  void build_cache();
  // replan() and set_budget(), under mutex_: adopts `next` when it differs from the plan in force.
  bool adopt_plan_locked(cache::BudgetPlan next);
  const uint8_t* hot_data(int64_t layer, int64_t first, int64_t end);
  void start_chunk(int64_t layer, int64_t chunk, StreamBuffer& buf);
  void wait_chunk(StreamBuffer& buf, StreamBuffer& other);
  void drain_streams(StreamBuffer& a, StreamBuffer& b);

  const OffloadedPack p_;
  BundleRowsLayout layout_;
  uint64_t bundle_bytes_ = 0;
  uint64_t budget_ = 0;
  uint64_t configured_budget_ = 0;  // OffloadOptions::budget_bytes
  uint64_t weights_bytes_ = 0;
  uint64_t io_buffer_bytes_ = 0;
  int64_t chunk_neurons_ = 0;
  cache::BudgetPlan plan_;
  OffloadOptions options_;
  uint64_t staging_bytes_ = 0;
  uint64_t fingerprint_ = 0;
  std::unique_ptr<cache::ActivationTracker> tracker_;
  uint64_t replans_ = 0;
  io::DirectFile file_;
  std::unique_ptr<io::BatchReader> reader_;
  std::unique_ptr<cache::NeuronCache> cache_;
  std::unique_ptr<cache::BundleFetcher> fetcher_;
  StreamBuffer stream_[2];
  io::AlignedBuffer embed_row_;                  // one embedding row, aligned for O_DIRECT
  std::vector<io::ReadRequest> requests_;        // one chunk's reads
  std::vector<io::ReadCompletion> completions_;  // reader capacity
  std::string stream_failure_;
  // sparse_step() of a prefetched layer (prefetch only): bundles computed before the
  // fetch, the rest of the list and their positions in it, arrivals renumbered to the whole list.
  std::vector<cache::FetchedBundle> now_, remapped_;
  std::vector<int32_t> later_;
  std::vector<uint32_t> later_index_;
  bool prefetch_ = false;  // OffloadOptions::prefetch, resolved for this pack
  std::vector<cache::PrefetchRequest> prefetch_requests_;  // prefetch(): layers_per_step
  std::vector<std::string> warnings_;
  mutable std::mutex mutex_;
  OffloadStats stats_;    // besides the cache's and fetcher's own
  OffloadStats carried_;  // the cache's and fetcher's counters from before the last replan()
  mutable std::vector<float> live_freq_;  // replan(): every layer's fitted live frequencies
};

}  // namespace ember
