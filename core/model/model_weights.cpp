#include "core/model/model_weights.h"

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/kernels/type_traits.h"
#include "core/model/tensor_checks.h"
#include "core/sparse/neuron_rows.h"

namespace ember {
using namespace weights_detail;

ModelWeights::ModelWeights(const gguf::GgufFile& file, const ModelConfig& c, WeightLoad load, bool repack,
                           bool offload_bundles, const LoadCheckpoint& checkpoint)
    : load_(load), checkpoint_(checkpoint ? &checkpoint : nullptr), repack_(repack), offload_bundles_(offload_bundles) {
  // The embedding table is read row by row (no matmul): a repacked copy would only help when it
  // doubles as the output head.
  // Under a memory budget, an embedding table that is not also the output head stays on storage:
  // a token needs one row of it (a small read), and on a 7B model it is ~2 % of the file.
  const bool embd_on_storage = offload_bundles && file.find_tensor("output.weight") != nullptr;
  repack_ = false;
  token_embd = bind_matrix(file, "token_embd.weight", c.n_embd, c.n_vocab, !embd_on_storage);
  token_embd_offset = require(file, "token_embd.weight").offset;
  repack_ = repack;
  output_norm = bind_vector(file, "output_norm.weight", c.n_embd);
  if (file.find_tensor("output.weight")) {
    output = bind_matrix(file, "output.weight", c.n_embd, c.n_vocab);
  } else {
    output = token_embd;  // tied
    repack_if_enabled(output);
  }
  layers.resize(static_cast<size_t>(c.n_layer));
  is_pack_ = pack::is_pack(file.metadata());
  if (is_pack_) pack_info_ = pack::read_pack_info(file.metadata(), c.n_embd);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = layers[static_cast<size_t>(i)];
    l.attn_norm = bind_vector(file, p + "attn_norm.weight", c.n_embd);
    l.wq = bind_matrix(file, p + "attn_q.weight", c.n_embd, c.n_embd_q());
    l.wk = bind_matrix(file, p + "attn_k.weight", c.n_embd, c.n_embd_kv());
    l.wv = bind_matrix(file, p + "attn_v.weight", c.n_embd, c.n_embd_kv());
    l.wo = bind_matrix(file, p + "attn_output.weight", c.n_embd_q(), c.n_embd);
    l.ffn_norm = bind_vector(file, p + "ffn_norm.weight", c.n_embd);
    if (c.is_moe()) {
      if (is_pack_) bind_moe_pack_layer(file, c, i);
      else bind_moe_layer(file, c, i);
      continue;
    }
    if (is_pack_) {
      bind_pack_layer(file, c, i);
      continue;
    }
    l.ffn_gate = bind_matrix(file, p + "ffn_gate.weight", c.n_embd, c.n_ff);
    l.ffn_up = bind_matrix(file, p + "ffn_up.weight", c.n_embd, c.n_ff);
    l.ffn_down = bind_matrix(file, p + "ffn_down.weight", c.n_ff, c.n_embd);
  }
  if (offload_bundles_ && !is_pack_) {
    throw std::runtime_error("offloading FFN bundles needs a neuron-bundle pack (make one with `ember pack`)");
  }
  if (c.is_moe()) check_moe_sparse_tensors(c);
  else bind_sparse_tensors(file, c);
  if (is_pack_) has_down_t_ = true;  // the bundles' down columns (bind_pack_layer)
  // Whatever loading left in the page cache (readahead around the tensors read) would count
  // against a cgroup memory cap and push out what matters; the bundles are read with O_DIRECT.
  if (offload_bundles_) io::drop_cached_pages(file.file());
  checkpoint_ = nullptr;  // the caller's function is not kept past the load
}

void ModelWeights::bind_pack_layer(const gguf::GgufFile& file, const ModelConfig& c, int64_t i) {
  LayerWeights& l = layers[static_cast<size_t>(i)];
  const PackUnit u = bind_pack_units(file, c, i, 1).front();
  l.neuron_perm = u.perm;
  l.neuron_freq = u.freq;
  l.bundles_offset = u.bundles_offset;
  l.ffn_gate = u.gate;
  l.ffn_up = u.up;
  l.ffn_down_t = u.down_t;
  l.ffn_down = shape_only(pack_info_.layout.down_type, c.n_ff, c.n_embd);
}

std::vector<ModelWeights::PackUnit> ModelWeights::bind_pack_units(const gguf::GgufFile& file, const ModelConfig& c,
                                                                  int64_t i, int64_t n_units) {
  const std::string p = "blk." + std::to_string(i) + ".";
  const std::string bundles_name = pack::bundles_name(i);
  // Two copies of a layer's FFN would leave it open which one counts: a pack has only bundles.
  for (const char* plain : {"ffn_gate", "ffn_up", "ffn_down", "ffn_down_t"}) {
    for (const std::string& name : {p + plain + ".weight", p + plain + "_exps.weight", p + plain + ".0.weight"}) {
      if (file.find_tensor(name)) {
        throw std::runtime_error("model tensor '" + name + "' must not be in a pack (its FFN is in '" + bundles_name + "')");
      }
    }
  }
  auto require_type = [](const gguf::TensorInfo& t, GgmlType type) {
    if (t.type != type) {
      throw std::runtime_error("model tensor '" + t.name + "': type " + std::string(type_name(t.type)) +
                               ", expected " + std::string(type_name(type)));
    }
  };
  // A dense layer's tensors are {.., n_ff}; an MoE layer's {.., n_ff, n_expert}.
  const bool stacked = c.is_moe();
  const int64_t ne_last = stacked ? n_units : 1;
  const pack::BundleLayout& b = pack_info_.layout;
  const gguf::TensorInfo& tb = require(file, bundles_name);
  require_type(tb, GgmlType::I8);
  check_shape(tb, static_cast<int64_t>(b.bundle_bytes), c.n_ff, ne_last);
  if (tb.offset % pack::kAlignment != 0) {
    throw std::runtime_error("model tensor '" + bundles_name + "': data at file offset " + std::to_string(tb.offset) +
                             " is not " + std::to_string(pack::kAlignment) + "-byte aligned");
  }
  const gguf::TensorInfo& tp = require(file, pack::perm_name(i));
  require_type(tp, GgmlType::I32);
  if (stacked) check_shape(tp, c.n_ff, n_units);
  else check_shape(tp, c.n_ff, 1);
  const gguf::TensorInfo& tf = require(file, pack::freq_name(i));
  require_type(tf, GgmlType::F32);
  if (stacked) check_shape(tf, c.n_ff, n_units);
  else check_shape(tf, c.n_ff, 1);

  // The permutation is not needed to compute (predictor rows are permuted with the bundles), but
  // a broken one means a broken file.
  const auto* perms = static_cast<const int32_t*>(data_of(file, tp));
  const auto* freqs = static_cast<const float*>(data_of(file, tf));
  // Offloaded: the views keep their shapes for the kernels' checks, with no data; the neuron cache
  // reads the bundles (core/cache/offloaded_ffn.h).
  // All in RAM with repacking on (the fast in-memory mode): the bundles are read into huge-page
  // memory rather than mapped. File pages are 4 KiB, and the sparse FFN reads ~7 KB bundles at
  // random: fewer TLB misses on 2 MiB pages (see io::AlignedBuffer).
  const uint8_t* bundles = nullptr;
  if (!offload_bundles_ && repack_ && load_ == WeightLoad::Mmap) {
    resident_bytes_ += tb.n_bytes;
    bundles = static_cast<const uint8_t*>(read_into_buffer(file, tb));
    // The copy is what counts: the bundles' page cache (two thirds of the file) would otherwise
    // double the memory the pack takes until the kernel gets round to reclaiming it.
    io::drop_cached_pages(file.file(), tb.offset, tb.n_bytes);
  } else if (!offload_bundles_) {
    bundles = static_cast<const uint8_t*>(data_of(file, tb));
  }
  // Bundle rows are never repacked: a repacked copy would add two thirds of the FFN's size to
  // memory, and the neuron cache (offloaded_ffn.h) computes from the bundles as they are, so the
  // all-in-RAM pack must too for results not to depend on the memory budget. Prompt batches lose
  // little (matmul repacks row blocks on the fly); only dense one-token steps are slower.
  std::vector<PackUnit> units(static_cast<size_t>(n_units));
  const uint64_t unit_bytes = b.bundle_bytes * static_cast<uint64_t>(c.n_ff);
  for (int64_t e = 0; e < n_units; ++e) {
    PackUnit& u = units[static_cast<size_t>(e)];
    u.perm = perms + e * c.n_ff;
    const std::string where = stacked ? " (expert " + std::to_string(e) + ")" : "";
    const std::string perm_error = pack::permutation_error(u.perm, c.n_ff);
    if (!perm_error.empty()) {
      throw std::runtime_error("model tensor '" + tp.name + "'" + where + " is not a permutation of [0, n_ff): " +
                               perm_error);
    }
    u.freq = freqs + e * c.n_ff;
    for (int64_t k = 0; k < c.n_ff; ++k) {
      const float f = u.freq[k];
      if (!(f >= 0.0f && f <= 1.0f)) {  // also false for NaN
        throw std::runtime_error("model tensor '" + tf.name + "'" + where + ": value " + std::to_string(f) + " at " +
                                 std::to_string(k) + " is not a frequency in [0, 1]");
      }
    }
    const uint8_t* mine = bundles ? bundles + static_cast<uint64_t>(e) * unit_bytes : nullptr;
    u.bundles_offset = tb.offset + static_cast<uint64_t>(e) * unit_bytes;
    u.gate = pack::gate_view(b, mine, c.n_ff, c.n_embd);
    u.up = pack::up_view(b, mine, c.n_ff, c.n_embd);
    u.down_t = pack::down_rows_view(b, mine, c.n_ff, c.n_embd);
  }
  return units;
}

namespace {

bool is_predictor_type(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::Q8_0 || t == GgmlType::Q4_0;
}

// The optional per-layer tensor `suffix` must be present in all layers or in none.
bool present_in_all_layers(const gguf::GgufFile& file, int64_t n_layer, const std::string& suffix) {
  int64_t present = 0, first_missing = -1, first_present = -1;
  for (int64_t i = 0; i < n_layer; ++i) {
    if (file.find_tensor("blk." + std::to_string(i) + "." + suffix)) {
      ++present;
      if (first_present < 0) first_present = i;
    } else if (first_missing < 0) {
      first_missing = i;
    }
  }
  if (present != 0 && present != n_layer) {
    throw std::runtime_error("model tensor 'blk." + std::to_string(first_missing) + "." + suffix + "' is missing: " +
                             "present in " + std::to_string(present) + " of " + std::to_string(n_layer) +
                             " layers (e.g. blk." + std::to_string(first_present) + "), needed in all or none");
  }
  return present == n_layer;
}

}  // namespace

void ModelWeights::bind_sparse_tensors(const gguf::GgufFile& file, const ModelConfig& c) {
  const bool fc1 = present_in_all_layers(file, c.n_layer, "fc1.weight");
  const bool fc2 = present_in_all_layers(file, c.n_layer, "fc2.weight");
  if (fc1 != fc2) {
    const std::string name = std::string("blk.0.") + (fc1 ? "fc2" : "fc1") + ".weight";
    throw std::runtime_error("model tensor '" + name + "' is missing: a predictor needs both fc1 and fc2 in every layer");
  }
  has_predictor_ = fc1;
  has_down_t_ = present_in_all_layers(file, c.n_layer, "ffn_down_t.weight");
  for (int64_t i = 0; i < c.n_layer && has_predictor_; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const gguf::TensorInfo& t1 = require(file, p + "fc1.weight");
    const gguf::TensorInfo& t2 = require(file, p + "fc2.weight");
    for (const gguf::TensorInfo* t : {&t1, &t2}) {
      if (!is_predictor_type(t->type)) {
        throw std::runtime_error("model tensor '" + t->name + "': type " + std::string(type_name(t->type)) +
                                 " is not supported for predictors (supported: F32, F16, Q8_0, Q4_0)");
      }
    }
    // fc1 {n_embd, r}: its row count is the rank, which fc2 {r, n_ff} must share.
    const int64_t r = t1.ne[1] <= static_cast<uint64_t>(c.n_ff) ? static_cast<int64_t>(t1.ne[1]) : 0;
    if (t1.ne[0] != static_cast<uint64_t>(c.n_embd) || r == 0) {
      throw std::runtime_error("model tensor '" + t1.name + "': shape " + shape_string(t1) + ", expected {" +
                               std::to_string(c.n_embd) + ", r} with rank r in [1, n_ff = " + std::to_string(c.n_ff) +
                               "]");
    }
    if (t2.ne[0] != t1.ne[1] || t2.ne[1] != static_cast<uint64_t>(c.n_ff)) {
      throw std::runtime_error("model tensor '" + t2.name + "': shape " + shape_string(t2) + ", expected {" +
                               std::to_string(r) + ", " + std::to_string(c.n_ff) + "} (rank " + std::to_string(r) +
                               " from " + t1.name + " " + shape_string(t1) + ")");
    }
    LayerWeights& l = layers[static_cast<size_t>(i)];
    l.pred_fc1 = bind_matrix(file, t1.name, c.n_embd, r);
    l.pred_fc2 = bind_matrix(file, t2.name, r, c.n_ff);
    max_predictor_rank_ = std::max(max_predictor_rank_, r);
  }
  for (int64_t i = 0; i < c.n_layer && has_down_t_; ++i) {
    const std::string name = "blk." + std::to_string(i) + ".ffn_down_t.weight";
    // Neuron rows are read whole or in block-aligned slices, never through matmul: no repacking.
    const bool repack = repack_;
    repack_ = false;
    layers[static_cast<size_t>(i)].ffn_down_t = bind_matrix(file, name, c.n_embd, c.n_ff);
    repack_ = repack;
  }
}

MatrixView ModelWeights::neuron_down_rows(int64_t layer) const {
  const LayerWeights& l = layers.at(static_cast<size_t>(layer));
  if (has_down_t_) return l.ffn_down_t;
  build_neuron_rows();
  return neuron_rows_->views[static_cast<size_t>(layer)];
}

uint64_t ModelWeights::neuron_rows_bytes() const { return neuron_rows_->total; }

void ModelWeights::build_neuron_rows() const {
  std::call_once(neuron_rows_->once, [&] {
    NeuronRowsCache& cache = *neuron_rows_;
    const size_t n = layers.size();
    cache.bytes.resize(n);
    cache.views.resize(n);
    // Layers are independent: transpose them on a few threads (mmap'd weights page in meanwhile).
    const unsigned n_threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 8));
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(n_threads);
    // Joins whatever was started, also when starting one more thread fails (a joinable std::thread
    // destroyed during unwinding would std::terminate).
    struct JoinAll {
      std::vector<std::thread>& threads;
      ~JoinAll() {
        for (auto& th : threads)
          if (th.joinable()) th.join();
      }
    } join_all{threads};
    for (unsigned t = 0; t < n_threads; ++t) {
      threads.emplace_back([&, t] {
        try {
          for (size_t i = t; i < n; i += n_threads) {
            const MatrixView& down = layers[i].ffn_down;
            const GgmlType type = neuron_rows_type(down.type);
            cache.bytes[i] = transpose_to_neuron_rows(down, type);
            cache.views[i] = neuron_rows_view(cache.bytes[i], type, down.cols, down.rows);
          }
        } catch (...) {  // out of memory: reported to the caller, not std::terminate
          errors[t] = std::current_exception();
        }
      });
    }
    for (auto& th : threads) th.join();
    for (const auto& e : errors) {
      if (e) {
        cache.bytes.clear();
        cache.views.clear();
        std::rethrow_exception(e);
      }
    }
    for (const auto& b : cache.bytes) cache.total += b.size();
  });
}

const void* ModelWeights::data_of(const gguf::GgufFile& file, const gguf::TensorInfo& t, bool may_map) {
  // Before each tensor: reading (and repacking) one takes a while on a big model, and a load that
  // the caller abandons stops here.
  if (checkpoint_ != nullptr) (*checkpoint_)();
  resident_bytes_ += t.n_bytes;
  // Under a memory budget, resident means resident: a mapped tensor lives in the page cache, which
  // a cgroup limit (or any memory pressure) evicts, and every fault back in then reads a whole
  // readahead window of the file. Only matrices about to be repacked (read once, then released) and
  // the tied embedding table (rows looked up per token) stay mapped, reading exactly themselves.
  if (load_ == WeightLoad::Mmap && (!offload_bundles_ || may_map)) {
    maps_.push_back(file.map_tensor(t));
    if (offload_bundles_) maps_.back().read_only_this();
    return maps_.back().data();
  }
  return read_into_buffer(file, t);
}

const void* ModelWeights::read_into_buffer(const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  buffers_.emplace_back(static_cast<size_t>(t.n_bytes), 64);
  file.read_tensor(t, buffers_.back().data());
  if (offload_bundles_) io::drop_cached_pages(file.file(), t.offset, t.n_bytes);
  return buffers_.back().data();
}

MatrixView ModelWeights::bind_matrix(const gguf::GgufFile& file, const std::string& name, int64_t ne0, int64_t ne1,
                                     bool map_data) {
  const gguf::TensorInfo& t = require(file, name);
  check_shape(t, ne0, ne1);
  require_kernel_type(t);
  MatrixView m;
  m.type = t.type;
  m.cols = ne0;
  m.rows = ne1;
  m.row_stride = row_bytes(t.type, static_cast<uint64_t>(ne0));
  if (!map_data) return m;
  m.data = data_of(file, t, /*may_map=*/true);
  repack_if_enabled(m);
  settle_mapped_original(file, t, std::span<MatrixView>(&m, 1));
  return m;
}

void ModelWeights::settle_mapped_original(const gguf::GgufFile& file, const gguf::TensorInfo& t,
                                          std::span<MatrixView> views) {
  // Under a memory budget a matrix should not count twice, nor stay mapped (data_of). Once every
  // view is repacked, matmul reads the repacked copies (the original only for rows past the last
  // whole panel, if any, which then page back in): the original is released. Otherwise (a type
  // without an interleaved layout, or repacking off) the views read an owned copy. The embedding
  // table is also read row by row for the input tokens: it keeps its mapped original.
  if (!offload_bundles_ || load_ != WeightLoad::Mmap || t.name == "token_embd.weight") return;
  const bool all_repacked =
      std::all_of(views.begin(), views.end(), [](const MatrixView& v) { return v.repacked != nullptr; });
  const auto* mapped = static_cast<const uint8_t*>(maps_.back().data());
  maps_.back().release_pages(file.file(), t.offset);
  if (all_repacked) {
    released_bytes_ += t.n_bytes;
    return;
  }
  const auto* copy = static_cast<const uint8_t*>(read_into_buffer(file, t));
  for (MatrixView& v : views) v.data = copy + (static_cast<const uint8_t*>(v.data) - mapped);
}

void ModelWeights::repack_if_enabled(MatrixView& m) {
  if (!repack_) return;
  const uint64_t size = repacked_size(m);
  if (size == 0) return;
  // In an AlignedBuffer: huge pages for the panels too (fewer TLB misses on the 2-thread decode).
  repacked_.emplace_back(static_cast<size_t>(size), 64);
  repack_for_matmul_into(m, repacked_.back().data());
  repacked_bytes_ += size;
  m.repacked = repacked_.back().data();  // the buffer's memory does not move with the vector
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
