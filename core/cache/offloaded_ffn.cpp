#include "core/cache/offloaded_ffn.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>

#include "core/cache/hot_loader.h"
#include "core/cache/prefix_frequencies.h"
#include "core/cache/tracker_file.h"
#include "core/kernels/type_traits.h"
#include "core/sparse/ffn_activation.h"
#include "core/sparse/neuron_rows_matmul.h"
#include "core/util/align.h"
#include "core/util/clock.h"
#include "core/util/fnv1a.h"

namespace ember {
namespace {

constexpr uint64_t kAlign = io::kDirectAlignment;
constexpr uint64_t kStreamReadBytes = 1u << 20;   // one streamed read (a chunk is a few of them)
constexpr uint64_t kMaxStagingBytes = 8u << 20;    // the fetcher's staging buffer at most
constexpr int64_t kChunkAlign = 64;                // stream chunks: whole matmul row blocks (16/64)
constexpr size_t kParallelBundles = 64;            // arrivals computed on the pool from this many
constexpr uint32_t kHotReadBytes = 1u << 20;       // one read of the hot prefixes (load_hot_prefixes)

io::DirectFile open_pack(const OffloadedPack& pack, const OffloadOptions& o) {
  return io::DirectFile::open(pack.path, o.buffered ? io::DirectMode::Buffered : io::DirectMode::PreferDirect);
}

// Streamed chunks are multiples of kChunkAlign neurons, so that the matmul row blocks inside a chunk
// are those of the whole matrix (the same floats); the last chunk ends at n_ff like the matrix.
int64_t stream_chunk_neurons(uint64_t chunk_bytes, uint64_t bundle_bytes, int64_t n_ff) {
  int64_t n = static_cast<int64_t>(chunk_bytes / bundle_bytes) / kChunkAlign * kChunkAlign;
  return std::min(std::max(n, kChunkAlign), n_ff);
}

// Storage errors leave OffloadedFfn as cache::FetchError whichever layer raised them (the reader's
// io::IoError when io_uring_submit or io_uring_wait_cqe fails, a failed read of the pack), so that
// callers handle one type: the daemon answers it with 500 model_read_failed and keeps serving.
// Every public method that reads ends in a function-try-block calling this.
[[noreturn]] void throw_as_fetch_error(const char* what, const io::IoError& e) {
  throw cache::FetchError(std::string(what) + ": " + e.what());
}

}  // namespace

OffloadedFfn::OffloadedFfn(const OffloadedPack& pack, const OffloadOptions& o)
    : p_(pack), budget_(o.budget_bytes), configured_budget_(o.budget_bytes), options_(o), file_(open_pack(pack, o)) {
  if (p_.bundles_offset.size() != static_cast<size_t>(p_.n_layer) || p_.neuron_freq.size() != p_.bundles_offset.size() ||
      p_.neuron_perm.size() != p_.bundles_offset.size()) {
    throw std::invalid_argument("offloaded FFN: the pack description needs one entry per layer");
  }
  layout_ = p_.layout;
  bundle_bytes_ = p_.bundle_bytes;
  const int64_t F = p_.n_ff;
  if (!file_.warning().empty()) warnings_.push_back(file_.warning());
  io::ReaderChoice choice = io::make_batch_reader(o.backend, file_, o.reader);
  reader_ = std::move(choice.reader);
  if (o.wrap_reader) reader_ = o.wrap_reader(std::move(reader_));
  if (!choice.fallback_reason.empty()) warnings_.push_back(choice.fallback_reason);

  // Buffers for I/O: the fetcher's staging and two stream chunks. Like the KV cache and the
  // compute scratch they are outside the budget (the budget caps resident model bytes)
  // and reported apart (io_buffer_bytes).
  chunk_neurons_ = stream_chunk_neurons(o.stream_chunk_bytes, bundle_bytes_, F);
  const uint64_t stream_bytes = align_up(static_cast<uint64_t>(chunk_neurons_) * bundle_bytes_, kAlign) + 2 * kAlign;
  // Staging: room for a whole layer's bundles (every miss of a step in one window) up to
  // kMaxStagingBytes, and at least the largest single read; bigger steps go out in windows.
  const uint64_t largest_read = align_up(o.max_read_bytes, kAlign) + align_up(bundle_bytes_, kAlign) + kAlign;
  const uint64_t layer_bytes = align_up(static_cast<uint64_t>(F) * bundle_bytes_, kAlign) + 2 * kAlign;
  const uint64_t staging = std::max(largest_read, std::min(kMaxStagingBytes, layer_bytes));
  io_buffer_bytes_ = staging + 2 * stream_bytes;
  weights_bytes_ = p_.resident_bytes;

  staging_bytes_ = staging;

  // The live activation counts start from the pack's profile, weighted as one half-life of traffic.
  std::vector<uint32_t> n_ffs(static_cast<size_t>(p_.n_layer), static_cast<uint32_t>(F));
  tracker_ = std::make_unique<cache::ActivationTracker>(n_ffs, o.activation_half_life);
  const double prior = std::isfinite(o.activation_half_life) ? o.activation_half_life : 1e6;
  fingerprint_ = fnv1a64(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&bundle_bytes_), 8));
  for (int64_t l = 0; l < p_.n_layer; ++l) {
    const auto i = static_cast<size_t>(l);
    tracker_->seed(i, std::span<const float>(p_.neuron_freq[i], static_cast<size_t>(F)), prior);
    fingerprint_ = fnv1a64(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(p_.neuron_perm[i]), static_cast<size_t>(F) * 4), fingerprint_);
  }
  const uint64_t file_bytes = file_.size();
  fingerprint_ = fnv1a64(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&file_bytes), 8), fingerprint_);

  plan_ = cache::plan_budget(plan_input(/*live=*/false));
  build_cache();
  options_.checkpoint = nullptr;  // the load's: replan() reads without it, and it is not kept
  embed_row_ = io::AlignedBuffer(static_cast<size_t>(align_up(p_.token_embd.row_stride, kAlign) + 2 * kAlign), kAlign);
  for (StreamBuffer& sb : stream_) sb.bytes = io::AlignedBuffer(stream_bytes, kAlign);
  requests_.resize(stream_bytes / kStreamReadBytes + 2);
  completions_.resize(std::max<size_t>(reader_->capacity(), 1));
  stream_failure_.reserve(256);
  prefetch_ = o.prefetch.value_or(p_.layers_per_step <= 1);
  if (prefetch_) {
    prefetch_requests_.resize(std::max<uint32_t>(1, p_.layers_per_step));
    now_.resize(static_cast<size_t>(F));
    remapped_.resize(static_cast<size_t>(F));
    later_.resize(static_cast<size_t>(F));
    later_index_.resize(static_cast<size_t>(F));
  }
}

cache::BudgetPlanInput OffloadedFfn::plan_input(bool live) const {
  const int64_t F = p_.n_ff;
  cache::BudgetPlanInput in;
  in.budget_bytes = budget_;
  in.resident_bytes = weights_bytes_;
  in.pinned_layers = 1;
  in.locality_tokens = options_.cold_locality_tokens;
  for (int64_t l = 0; l < p_.n_layer; ++l) {
    const float* freq = p_.neuron_freq[static_cast<size_t>(l)];
    // Any step may list every neuron of a layer (the predictor has no upper bound), so the pool
    // holds at least one layer's worth of cold slots.
    in.layers.push_back({static_cast<uint32_t>(F), bundle_bytes_, std::span<const float>(freq, static_cast<size_t>(F)),
                         static_cast<uint32_t>(F)});
  }
  if (live) {
    // Live frequencies are not ordered like the pack: the planner gets their non-increasing fit
    // (cache/prefix_frequencies.h), which keeps each layer's hot set a prefix of its bundles.
    live_freq_.resize(static_cast<size_t>(p_.n_layer * F));
    for (int64_t l = 0; l < p_.n_layer; ++l) {
      std::span<float> f(live_freq_.data() + l * F, static_cast<size_t>(F));
      tracker_->frequency(static_cast<size_t>(l), f);
      cache::prefix_plan_frequencies(f, f);
      in.layers[static_cast<size_t>(l)].frequency = f;
    }
  }
  return in;
}

void OffloadedFfn::build_cache() {
  const int64_t F = p_.n_ff;
  std::vector<cache::CacheLayerShape> shapes;
  std::vector<uint64_t> offsets;
  for (int64_t l = 0; l < p_.n_layer; ++l) {
    shapes.push_back({static_cast<uint32_t>(F), bundle_bytes_, plan_.hot[static_cast<size_t>(l)]});
    offsets.push_back(p_.bundles_offset[static_cast<size_t>(l)]);
  }
  fetcher_.reset();  // the old cache and its fetcher go first: memory never holds two caches
  cache_.reset();
  cache_ = std::make_unique<cache::NeuronCache>(shapes, plan_.cold_slots);
  stats_.hot_load_bytes += cache::load_hot_prefixes(*cache_, *reader_, file_, offsets, kHotReadBytes, options_.checkpoint);
  cache::BundleFetcherOptions fo;
  fo.max_active = static_cast<uint32_t>(F);
  fo.max_prefetch_layers = std::max<uint32_t>(1, p_.layers_per_step);
  fo.max_read_bytes = options_.max_read_bytes;
  fo.staging_bytes = staging_bytes_;
  fetcher_ = std::make_unique<cache::BundleFetcher>(*cache_, *reader_, file_, fo);
  if (!fetcher_->warning().empty() && warnings_.size() < 8) warnings_.push_back(fetcher_->warning());
}

bool OffloadedFfn::replan() try {
  std::lock_guard<std::mutex> lock(mutex_);
  return adopt_plan_locked(cache::plan_budget(plan_input(/*live=*/true)));
} catch (const io::IoError& e) {
  throw_as_fetch_error("re-planning the neuron cache", e);
}

uint64_t OffloadedFfn::set_budget(uint64_t bytes) try {
  std::lock_guard<std::mutex> lock(mutex_);
  // The minimum does not depend on the budget (resident weights plus one layer's cold slots).
  const uint64_t target = std::max(bytes == 0 ? configured_budget_ : bytes, plan_.minimum_bytes);
  if (target == budget_) return budget_;
  budget_ = target;
  adopt_plan_locked(cache::plan_budget(plan_input(/*live=*/true)));
  return budget_;
} catch (const io::IoError& e) {
  throw_as_fetch_error("resizing the neuron cache", e);
}

bool OffloadedFfn::adopt_plan_locked(cache::BudgetPlan next) {
  if (next.hot == plan_.hot && next.cold_slots == plan_.cold_slots) return false;
  // Counters of the old cache and fetcher carry over into the totals.
  OffloadStats old;
  old.cache = cache_->stats();
  old.fetch = fetcher_->stats();
  add_offload_stats(carried_, old);
  plan_ = std::move(next);
  try {
    build_cache();
  } catch (...) {
    // The hot prefixes could not be read. The old cache is gone (memory never holds two), so leave
    // a working one behind: the same cold pool and no hot neurons, which needs no reads. Steps
    // stay correct, only slower, until a later replan() succeeds.
    std::fill(plan_.hot.begin(), plan_.hot.end(), 0u);
    std::fill(plan_.hot_bytes.begin(), plan_.hot_bytes.end(), 0u);
    plan_.total_bytes -= plan_.hot_total_bytes;
    plan_.hot_total_bytes = 0;
    plan_.hot_activation_share = 0.0;
    build_cache();
    throw;
  }
  ++replans_;
  return true;
}

void OffloadedFfn::check_consistency() const {
  std::lock_guard<std::mutex> lock(mutex_);
  cache_->check_consistency();
  if (cache_->pending() != 0 || fetcher_->in_progress()) throw std::logic_error("neuron cache: a fetch is still pending");
  if (stream_[0].pending + stream_[1].pending != 0 || reader_->in_flight() != 0) {
    throw std::logic_error("neuron cache: reads are still in flight between steps");
  }
}

uint64_t OffloadedFfn::replans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return replans_;
}

cache::TrackerIdentity OffloadedFfn::tracker_identity() const {
  return {std::vector<uint32_t>(static_cast<size_t>(p_.n_layer), static_cast<uint32_t>(p_.n_ff)), fingerprint_};
}

void OffloadedFfn::save_activations(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  cache::save_tracker_atomically(path, *tracker_, tracker_identity());
}

void OffloadedFfn::load_activations(const std::string& path) {
  cache::ActivationTracker loaded = cache::load_tracker(path, tracker_identity());
  loaded.set_half_life(options_.activation_half_life);
  std::lock_guard<std::mutex> lock(mutex_);
  *tracker_ = std::move(loaded);
}

void OffloadedFfn::embed(int32_t token, float* out) try {
  const MatrixView& e = p_.token_embd;
  const uint64_t at = p_.token_embd_offset + e.row_stride * static_cast<uint64_t>(token);
  const uint64_t end = at + e.row_stride;  // inside the file: checked when the model was opened
  const uint64_t a0 = file_.is_direct() ? at / kAlign * kAlign : at;
  const uint64_t a1 = file_.is_direct() ? align_up(end, kAlign) : end;
  std::lock_guard<std::mutex> lock(mutex_);
  // Through the batch reader like every other read of the pack, so that a failure (a bad disk, a
  // pack truncated under us) is reported the same way, as a FetchError, and fault injection covers
  // it. A prefetch's reads share the reader: they land (and are committed) first, so that the one
  // completion harvested below is this read's.
  fetcher_->cancel();
  const io::ReadRequest request{a0, static_cast<uint32_t>(a1 - a0), static_cast<uint32_t>(end - a0), embed_row_.data(), 0};
  reader_->submit(std::span<const io::ReadRequest>(&request, 1));
  if (reader_->harvest(completions_, 1) != 1) {
    throw std::logic_error("OffloadedFfn::embed: reads of another step were still in flight");
  }
  if (!completions_[0].ok()) {
    throw cache::FetchError("reading the embedding of token " + std::to_string(token) + ": " +
                            io::describe_failure(file_.path(), completions_[0]));
  }
  kernel_traits(e.type)->to_float(embed_row_.data() + (at - a0), out, e.cols);
} catch (const io::IoError& e) {
  throw_as_fetch_error("reading a token embedding", e);
}

std::string OffloadedFfn::backend_name() const { return reader_->backend_name(); }
uint32_t OffloadedFfn::queue_depth() const { return static_cast<uint32_t>(reader_->queue_depth()); }

OffloadStats OffloadedFfn::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  OffloadStats s = stats_;
  s.cache = cache_->stats();
  s.fetch = fetcher_->stats();
  add_offload_stats(s, carried_);  // carried_ holds only cache and fetcher counters
  s.hot_load_bytes = stats_.hot_load_bytes;
  return s;
}

void OffloadedFfn::reset_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t hot = stats_.hot_load_bytes;
  stats_ = {};
  carried_ = {};
  stats_.hot_load_bytes = hot;
  cache_->reset_stats();
  fetcher_->reset_stats();
}

void OffloadedFfn::sparse_step(int64_t layer, const float* x, const int32_t* active, int64_t n_active,
                               ThreadPool& pool, SparseBundleFfn& kernel, float* out) try {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.sparse_steps;
  tracker_->record(static_cast<uint32_t>(layer), std::span<const int32_t>(active, static_cast<size_t>(n_active)));
  cache_->begin_step();  // the previous layer's bundles may be evicted now
  kernel.begin(p_.activation, x, n_active);
  // Bundles [b, e) of a batch, kActivateGroup at a time (their dots computed together).
  auto activate_range = [&](std::span<const cache::FetchedBundle> bundles, int64_t b, int64_t e) {
    constexpr int64_t G = SparseBundleFfn::kActivateGroup;
    for (int64_t i = b; i < e; i += G) {
      const int64_t m = std::min(G, e - i);
      int64_t ks[G];
      const uint8_t* data[G];
      const void* next[G];  // the next group's bundles, requested while this one computes
      int n_next = 0;
      for (int64_t j = 0; j < m; ++j) {
        ks[j] = bundles[static_cast<size_t>(i + j)].index;
        data[j] = bundles[static_cast<size_t>(i + j)].data;
      }
      for (int64_t j = i + G; j < std::min(e, i + 2 * G); ++j) next[n_next++] = bundles[static_cast<size_t>(j)].data;
      kernel.activate_group(ks, data, m, RowsAhead{next, n_next});
    }
  };
  auto activate = [&](std::span<const cache::FetchedBundle> bundles) {
    const auto n = static_cast<int64_t>(bundles.size());
    if (bundles.size() < kParallelBundles) {
      activate_range(bundles, 0, n);
      return;
    }
    const int64_t tasks = (n + 31) / 32;
    pool.parallel_for(tasks, [&](int64_t t, int) { activate_range(bundles, t * 32, std::min(n, (t + 1) * 32)); });
  };
  std::span<const int32_t> list(active, static_cast<size_t>(n_active));
  const uint64_t tensor = p_.bundles_offset[static_cast<size_t>(layer)];
  if (fetcher_->prefetch_in_flight() && fetcher_->prefetch_covers(static_cast<uint32_t>(layer))) {
    // This layer's predicted bundles are being read (prefetch()): compute the bundles already in
    // memory while those reads land, then fetch the rest, which begin() finds mostly prefetched.
    // peek first: a bundle still being read is counted once, as the hit begin() finds it to be.
    // Out-of-range entries go to the rest, whose begin() refuses them.
    size_t n_now = 0, n_later = 0;
    for (int64_t i = 0; i < n_active; ++i) {
      const auto neuron = static_cast<uint32_t>(active[i]);
      const bool resident = neuron < static_cast<uint32_t>(p_.n_ff) && cache_->peek(static_cast<uint32_t>(layer), neuron) != nullptr;
      if (resident) {
        now_[n_now++] = cache::FetchedBundle{static_cast<uint32_t>(i), neuron, cache_->find(static_cast<uint32_t>(layer), neuron)};
      } else {
        later_index_[n_later] = static_cast<uint32_t>(i);
        later_[n_later++] = active[i];
      }
    }
    // The fetch numbers bundles by their place in the rest: back to their place in the whole list.
    auto renumbered = [&](std::span<const cache::FetchedBundle> got) {
      for (size_t k = 0; k < got.size(); ++k) {
        remapped_[k] = got[k];
        remapped_[k].index = later_index_[got[k].index];
      }
      return std::span<const cache::FetchedBundle>(remapped_.data(), got.size());
    };
    try {
      activate(std::span<const cache::FetchedBundle>(now_.data(), n_now));
      fetcher_->begin(static_cast<uint32_t>(layer), std::span<const int32_t>(later_.data(), n_later), tensor);
      activate(renumbered(fetcher_->resident()));
      for (auto arrived = fetcher_->next_arrivals(); !arrived.empty(); arrived = fetcher_->next_arrivals()) {
        activate(renumbered(arrived));
      }
    } catch (...) {
      fetcher_->cancel();
      throw;
    }
    kernel.finish(out, pool);
    return;
  }
  // Resident neurons are computed while the misses' reads are in flight, then each read's bundles
  // as it completes. A FetchError leaves the cache consistent (the fetcher has cancelled the rest).
  fetcher_->begin(static_cast<uint32_t>(layer), list, tensor);
  if (fetcher_->resident().size() == static_cast<size_t>(n_active)) {
    // Every bundle is in memory (no reads in flight): one fused pass, as all in RAM.
    for (const cache::FetchedBundle& f : fetcher_->resident()) kernel.set_bundle(f.index, f.data);
    fetcher_->next_arrivals();  // ends the fetch (nothing was missing)
    kernel.run(out, pool);
    return;
  }
  try {
    activate(fetcher_->resident());
    for (auto arrived = fetcher_->next_arrivals(); !arrived.empty(); arrived = fetcher_->next_arrivals()) {
      activate(arrived);
    }
  } catch (...) {
    fetcher_->cancel();
    throw;
  }
  kernel.finish(out, pool);
} catch (const io::IoError& e) {
  throw_as_fetch_error("sparse FFN step", e);
}

void OffloadedFfn::prefetch(std::span<const Predicted> layers) {
  std::lock_guard<std::mutex> lock(mutex_);
  cache_->begin_step();  // the previous layer is done: its bundles may make room
  const size_t n = std::min(layers.size(), prefetch_requests_.size());
  for (size_t i = 0; i < n; ++i) {
    const Predicted& p = layers[i];
    // A layer out of range is refused by the fetcher (invalid_argument); give it no offset lookup.
    const uint64_t offset = p.layer >= 0 && p.layer < p_.n_layer ? p_.bundles_offset[static_cast<size_t>(p.layer)] : 0;
    prefetch_requests_[i] = cache::PrefetchRequest{static_cast<uint32_t>(p.layer),
                                                   std::span<const int32_t>(p.ids, static_cast<size_t>(p.n)), offset};
  }
  try {
    fetcher_->prefetch(std::span<const cache::PrefetchRequest>(prefetch_requests_.data(), n));
  } catch (const cache::FetchError&) {
    // Best effort: the step reads what the prefetch could not, and reports a failing disk itself.
  } catch (const io::IoError&) {
    // Likewise (the reader itself failed: the step's own reads will say so).
  }
}

const uint8_t* OffloadedFfn::hot_data(int64_t layer, int64_t first, int64_t end) {
  const cache::CacheLayerShape& shape = cache_->layer(static_cast<size_t>(layer));
  if (end > static_cast<int64_t>(shape.hot)) return nullptr;
  return cache_->hot_region(static_cast<size_t>(layer)).data + static_cast<uint64_t>(first) * bundle_bytes_;
}

void OffloadedFfn::start_chunk(int64_t layer, int64_t chunk, StreamBuffer& buf) {
  const int64_t first = chunk * chunk_neurons_, end = std::min(p_.n_ff, first + chunk_neurons_);
  const uint64_t begin_at = p_.bundles_offset[static_cast<size_t>(layer)] + static_cast<uint64_t>(first) * bundle_bytes_;
  const uint64_t end_at = begin_at + static_cast<uint64_t>(end - first) * bundle_bytes_;
  const uint64_t a0 = begin_at / kAlign * kAlign, a1 = align_up(end_at, kAlign);
  size_t n = 0;
  for (uint64_t pos = a0; pos < a1; pos += kStreamReadBytes) {
    io::ReadRequest& r = requests_[n++];
    r.offset = pos;
    r.length = static_cast<uint32_t>(std::min(kStreamReadBytes, a1 - pos));
    // The bundle tensor may end the file short of the aligned end: only its own bytes must arrive.
    r.wanted = static_cast<uint32_t>(std::min<uint64_t>(r.length, end_at - pos));
    r.dst = buf.bytes.data() + (pos - a0);
    r.tag = static_cast<uint64_t>(&buf - stream_);
  }
  reader_->submit(std::span<const io::ReadRequest>(requests_.data(), n));
  buf.chunk = chunk;
  buf.pending = static_cast<uint32_t>(n);
  buf.data = buf.bytes.data() + (begin_at - a0);
  stats_.stream_reads += n;
}

void OffloadedFfn::wait_chunk(StreamBuffer& buf, StreamBuffer& other) {
  const uint64_t t0 = now_ns();
  while (buf.pending > 0) {
    const size_t got = reader_->harvest(completions_, 1);
    for (size_t i = 0; i < got; ++i) {
      const io::ReadCompletion& done = completions_[i];
      StreamBuffer& owner = done.tag == 0 ? stream_[0] : stream_[1];
      --owner.pending;
      if (done.ok()) {
        stats_.stream_bytes_read += static_cast<uint64_t>(done.result);
      } else if (stream_failure_.empty()) {
        stream_failure_ = io::describe_failure(file_.path(), done);
      }
    }
  }
  stats_.stream_wait_ns += now_ns() - t0;
  if (!stream_failure_.empty()) {
    drain_streams(buf, other);
    std::string message = "reading FFN bundles: " + stream_failure_;
    stream_failure_.clear();
    throw cache::FetchError(message);
  }
}

void OffloadedFfn::drain_streams(StreamBuffer& a, StreamBuffer& b) {
  // Reads still in flight write into our buffers: they must land before the buffers are reused.
  while (a.pending + b.pending > 0) {
    const size_t got = reader_->harvest(completions_, 1);
    for (size_t i = 0; i < got; ++i) --(completions_[i].tag == 0 ? stream_[0] : stream_[1]).pending;
  }
  a.chunk = b.chunk = -1;
}

void OffloadedFfn::dense_step(int64_t layer, const float* x, int64_t n, float* gate, float* up, float* out,
                              ThreadPool& pool, MatmulScratch& scratch) try {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.dense_steps;
  fetcher_->cancel();  // a prefetch's reads share the reader: they land (and are committed) first
  const int64_t F = p_.n_ff, E = p_.n_embd, cn = chunk_neurons_;
  const int64_t n_chunks = (F + cn - 1) / cn;
  // Neurons [first, first + count) from their bundles; the down sums continue those of the earlier
  // neurons (ascending), so any split at multiples of 64 neurons gives the whole layer's floats.
  auto compute = [&](int64_t first, int64_t count, const uint8_t* bundles) {
    MatrixView g{layout_.gate_type, E, count, bundles, bundle_bytes_, nullptr};
    MatrixView u{layout_.up_type, E, count, bundles + layout_.up_offset, bundle_bytes_, nullptr};
    MatrixView d{layout_.down_type, E, count, bundles + layout_.down_offset, bundle_bytes_, nullptr};
    matmul(g, x, n, E, gate + first, F, pool, scratch);
    matmul(u, x, n, E, up + first, F, pool, scratch);
    for (int64_t t = 0; t < n; ++t) ffn_activation(gate + t * F + first, up + t * F + first, count, p_.activation);
    neuron_rows_matmul(d, gate + first, n, F, out, E, pool, /*accumulate=*/first > 0);
  };
  // The whole chunks inside the hot prefix are computed in place in one go (while the first chunk
  // past them is being read); every later chunk is streamed, chunk j+1 read while j is computed.
  const int64_t hot_chunks = std::min<int64_t>(static_cast<int64_t>(cache_->layer(static_cast<size_t>(layer)).hot) / cn, n_chunks);
  try {
    if (hot_chunks < n_chunks) start_chunk(layer, hot_chunks, stream_[0]);
    if (hot_chunks > 0) compute(0, std::min(F, hot_chunks * cn), hot_data(layer, 0, std::min(F, hot_chunks * cn)));
    for (int64_t j = hot_chunks; j < n_chunks; ++j) {
      StreamBuffer& mine = stream_[(j - hot_chunks) % 2];
      StreamBuffer& next = stream_[(j - hot_chunks + 1) % 2];
      if (j + 1 < n_chunks) start_chunk(layer, j + 1, next);  // its buffer held chunk j-1, done
      wait_chunk(mine, next);
      compute(j * cn, std::min(F, (j + 1) * cn) - j * cn, mine.data);
      mine.chunk = -1;
    }
  } catch (...) {
    drain_streams(stream_[0], stream_[1]);
    throw;
  }
} catch (const io::IoError& e) {
  throw_as_fetch_error("dense FFN step", e);
}

}  // namespace ember
