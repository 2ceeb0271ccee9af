#include "core/synth/synth_writer.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"
#include "core/kernels/type_traits.h"
#include "core/synth/synth_vocab.h"
#include "core/synth/synth_weights.h"

namespace ember::synth {

bool is_synth_type(GgmlType type) {
  return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::Q8_0 || type == GgmlType::Q4_0 ||
         type == GgmlType::Q4_K;
}

uint32_t ggml_file_type(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q8_0: return 7;
    case GgmlType::Q4_K: return 14;  // LLAMA_FTYPE_MOSTLY_Q4_K_S
    default: throw std::invalid_argument("synth: no file type for " + std::string(type_name(type)));
  }
}

std::optional<FfnActivation> parse_activation(std::string_view name) {
  if (name == "silu") return FfnActivation::SiLU;
  if (name == "relu") return FfnActivation::ReLU;
  if (name == "drelu") return FfnActivation::DReLU;
  return std::nullopt;
}

// Spelled here rather than through activation_name() so that core/synth needs only the enum of
// core/model, not its library.
const char* activation_key_value(FfnActivation a) {
  switch (a) {
    case FfnActivation::SiLU: return "silu";
    case FfnActivation::ReLU: return "relu";
    case FfnActivation::DReLU: return "drelu";
  }
  return "silu";
}

namespace {

void add_llama_metadata(gguf::GgufWriter& w, const ModelShape& s, const SynthOptions& o) {
  const GgmlType type = o.type;
  const uint64_t seed = o.seed;
  w.add_string("general.architecture", "llama");
  w.add_string("general.name", "ember-synth-" + s.preset);
  w.add_u32("general.file_type", ggml_file_type(type));
  w.add_u32("llama.context_length", static_cast<uint32_t>(s.context_length));
  w.add_u32("llama.embedding_length", static_cast<uint32_t>(s.dim));
  w.add_u32("llama.block_count", static_cast<uint32_t>(s.n_layers));
  w.add_u32("llama.feed_forward_length", static_cast<uint32_t>(s.ffn_dim));
  if (s.is_moe()) {  // dense models state no expert keys, as llama.cpp's own files
    w.add_u32("llama.expert_count", static_cast<uint32_t>(s.n_experts));
    w.add_u32("llama.expert_used_count", static_cast<uint32_t>(s.n_experts_used));
  }
  w.add_u32("llama.rope.dimension_count", static_cast<uint32_t>(s.head_dim()));
  w.add_u32("llama.attention.head_count", static_cast<uint32_t>(s.n_heads));
  w.add_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads));
  w.add_f32("llama.attention.layer_norm_rms_epsilon", s.rms_eps);
  w.add_f32("llama.rope.freq_base", s.rope_theta);
  w.add_u32("llama.vocab_size", static_cast<uint32_t>(s.n_vocab));
  w.add_string("ember.synth.preset", s.preset);
  w.add_u64("ember.synth.seed", seed);
  // SiLU models keep their old metadata exactly (no key means SwiGLU to every reader).
  if (o.activation != FfnActivation::SiLU) w.add_string("llama.ffn_activation", activation_key_value(o.activation));
}

void add_builtin_tokenizer(gguf::GgufWriter& w, const Vocabulary& v) {
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", v.tokens);
  w.add_f32_array("tokenizer.ggml.scores", v.scores);
  w.add_i32_array("tokenizer.ggml.token_type", v.types);
  w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
  w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
  w.add_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk_id));
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_bool("tokenizer.ggml.add_eos_token", false);
}

int64_t tokenizer_size(const gguf::GgufFile& source) {
  const auto* tokens = source.metadata().get_string_array("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->empty())
    throw std::invalid_argument("synth: --vocab-from " + source.path() + " has no tokenizer.ggml.tokens");
  return static_cast<int64_t>(tokens->size());
}

// Copies every tokenizer.* key of another model.
void copy_tokenizer(gguf::GgufWriter& w, const gguf::GgufFile& source) {
  for (const auto& [key, value] : source.metadata().entries())
    if (key.rfind("tokenizer.", 0) == 0) w.add_value(key, value);
}

std::vector<int32_t> token_types_of(const gguf::GgufFile& source) {
  const auto types = source.metadata().get_int_array("tokenizer.ggml.token_type");
  return types ? std::vector<int32_t>(types->begin(), types->end()) : std::vector<int32_t>{};
}

std::vector<uint8_t> quiet_output_rows(const std::vector<int32_t>& token_types) {
  std::vector<uint8_t> quiet(token_types.size(), 0);
  for (size_t i = 0; i < token_types.size(); ++i)
    quiet[i] = token_types[i] != static_cast<int32_t>(TokenType::Normal) &&
               token_types[i] != static_cast<int32_t>(TokenType::UserDefined);
  return quiet;
}

// Norms and routers are F32 (llama.cpp never quantizes a router: n_experts rows, and every
// routing decision hangs on them); predictors of their own type (F16 by default: small, and their
// rank need not fit a quantization block); every other matrix is of the requested type.
GgmlType storage_type(const TensorSpec& t, const SynthOptions& o) {
  if (!t.is_matrix() || t.role == TensorRole::Router) return GgmlType::F32;
  if (t.role == TensorRole::PredictorFc1 || t.role == TensorRole::PredictorFc2) return o.predictor_type;
  return o.type;
}

// Generates and quantizes one tensor in slices spread over the threads, writing slices in order.
class TensorStreamer {
 public:
  TensorStreamer(int threads, uint64_t seed) : threads_(threads), seed_(seed), scratch_(threads), packed_(threads) {}

  void write(gguf::GgufWriter& w, const TensorSpec& spec, GgmlType type) {
    const uint64_t row_len = spec.ne[0];
    const uint64_t rows = spec.n_elements() / row_len;
    const uint64_t bytes_per_row = row_bytes(type, row_len);
    const KernelTraits* traits = type == GgmlType::F32 ? nullptr : kernel_traits(type);
    if (type != GgmlType::F32 && (traits == nullptr || traits->from_float == nullptr))
      throw std::invalid_argument("synth: no quantizer for " + std::string(type_name(type)));
    const uint64_t rows_per_slice = std::max<uint64_t>(1, kSliceElements / row_len);
    for (uint64_t first = 0; first < rows; first += rows_per_slice * static_cast<uint64_t>(threads_)) {
      std::vector<std::thread> workers;
      std::vector<std::exception_ptr> errors(static_cast<size_t>(threads_));
      std::vector<uint64_t> slice_bytes(static_cast<size_t>(threads_), 0);
      auto work = [&](int t) {
        try {
          const uint64_t begin = std::min(rows, first + static_cast<uint64_t>(t) * rows_per_slice);
          const uint64_t end = std::min(rows, begin + rows_per_slice);
          if (begin == end) return;
          auto& floats = scratch_[static_cast<size_t>(t)];
          auto& out = packed_[static_cast<size_t>(t)];
          floats.resize((end - begin) * row_len);
          out.resize((end - begin) * bytes_per_row);
          generate_rows(spec, seed_, begin, end, floats.data());
          if (traits == nullptr)
            std::copy_n(reinterpret_cast<const uint8_t*>(floats.data()), out.size(), out.data());
          else
            for (uint64_t r = 0; r < end - begin; ++r)
              traits->from_float(floats.data() + r * row_len, out.data() + r * bytes_per_row,
                                 static_cast<int64_t>(row_len));
          slice_bytes[static_cast<size_t>(t)] = out.size();
        } catch (...) {
          errors[static_cast<size_t>(t)] = std::current_exception();
        }
      };
      for (int t = 1; t < threads_; ++t) workers.emplace_back(work, t);
      work(0);
      for (auto& th : workers) th.join();
      for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
      for (int t = 0; t < threads_; ++t)
        if (slice_bytes[static_cast<size_t>(t)] > 0)
          w.write_tensor_data(packed_[static_cast<size_t>(t)].data(), slice_bytes[static_cast<size_t>(t)]);
    }
  }

 private:
  static constexpr uint64_t kSliceElements = 1u << 21;  // 8 MiB of floats per thread per round
  int threads_;
  uint64_t seed_;
  std::vector<std::vector<float>> scratch_;
  std::vector<std::vector<uint8_t>> packed_;
};

}  // namespace

SynthResult write_synth_model(const SynthOptions& options, const SynthProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  if (!is_synth_type(options.type))
    throw std::invalid_argument("synth: type " + std::string(type_name(options.type)) +
                                " is not one synth writes (F32, F16, Q8_0, Q4_0, Q4_K)");
  if (options.output_path.empty()) throw std::invalid_argument("synth: no output path");
  ModelShape shape = preset_shape(options.preset);
  if (options.n_layers < 0 || options.n_layers > 1024)
    throw std::invalid_argument("synth: --layers " + std::to_string(options.n_layers) + " is outside [1, 1024]");
  if (options.n_layers > 0) shape.n_layers = options.n_layers;
  if ((options.predictor || options.down_transposed || options.predictor_rank != 0) &&
      options.activation == FfnActivation::SiLU)
    throw std::invalid_argument(
        "synth: --predictor, --predictor-rank and --down-transposed need --activation relu or drelu "
        "(a SiLU FFN has no exact zeros to predict)");
  if (options.predictor_type != GgmlType::F16 && options.predictor_type != GgmlType::Q8_0 &&
      options.predictor_type != GgmlType::Q4_0)
    throw std::invalid_argument("synth: predictor type " + std::string(type_name(options.predictor_type)) +
                                " is not one synth writes (F16, Q8_0, Q4_0)");
  if (options.predictor && options.predictor_type != GgmlType::F16) {
    const int64_t rank = options.predictor_rank > 0 ? options.predictor_rank : default_predictor_rank(shape.dim);
    if (rank % 32 != 0)
      throw std::invalid_argument("synth: a " + std::string(type_name(options.predictor_type)) +
                                  " predictor needs a rank that is a multiple of 32, not " + std::to_string(rank));
  }

  // The tokenizer decides n_vocab, which the llama.* keys state, so it is settled first.
  std::optional<gguf::GgufFile> source;
  Vocabulary builtin;
  if (options.vocab_from.empty()) {
    builtin = build_vocabulary(static_cast<int32_t>(shape.n_vocab));
  } else {
    source = gguf::GgufFile::open(options.vocab_from);
    shape.n_vocab = tokenizer_size(*source);
  }
  gguf::GgufWriter writer;
  add_llama_metadata(writer, shape, options);
  if (source)
    copy_tokenizer(writer, *source);
  else
    add_builtin_tokenizer(writer, builtin);

  SparseParams sparse;
  sparse.activation = options.activation;
  sparse.predictor = options.predictor;
  sparse.predictor_rank = options.predictor_rank;
  sparse.down_transposed = options.down_transposed;  // implied for mixtures (model_tensors)
  // 4-bit rounding of the gate rows adds noise the predictor (made from the exact rows) cannot
  // see; a wider margin keeps recall above 0.95 there.
  if (options.type == GgmlType::Q4_0 || options.type == GgmlType::Q4_K) sparse.predictor_margin = kPredictorMargin4Bit;
  auto tensors = model_tensors(shape, sparse);
  tensors.back().quiet_rows = quiet_output_rows(source ? token_types_of(*source) : builtin.types);
  for (const auto& t : tensors) writer.add_tensor(t.name, storage_type(t, options), t.ne);
  if (options.predictor) {
    writer.set_powerinfer_magic(true);
    writer.add_f32("powerinfer.sparse_threshold", 0.0f);
  }
  writer.begin(options.output_path);
  constexpr int kMaxThreads = 256;  // each one holds ~12 MiB of slice buffers
  const int threads = std::min(kMaxThreads, options.threads > 0 ? options.threads
                                                                : std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  TensorStreamer streamer(threads, options.seed);
  for (size_t i = 0; i < tensors.size(); ++i) {
    streamer.write(writer, tensors[i], storage_type(tensors[i], options));
    if (progress) progress(i + 1, tensors.size());
  }
  writer.finish();

  SynthResult result;
  result.shape = shape;
  result.n_params = parameter_count(shape);
  result.file_bytes = std::filesystem::file_size(options.output_path);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace ember::synth
