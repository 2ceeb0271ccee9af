// `ember synth`: writes a deterministic synthetic llama model (the project's benchmark and demo
// models). The logic lives in core/synth; this file only maps flags onto SynthOptions.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include "core/synth/synth_writer.h"
#include "tools/subcommands.h"

namespace ember::cli {

void register_synth(CLI::App& app, int& exit_code) {
  struct Flags {
    std::string preset = "tiny";
    std::string type = "Q4_0";
    std::string output;
    uint64_t seed = 0;
    std::string vocab_from;
    int threads = 0;
    bool quiet = false;
    std::string activation = "silu";
    bool predictor = false;
    int64_t predictor_rank = 0;
    std::string predictor_type = "F16";
    bool down_transposed = false;
    int64_t layers = 0;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* sub = app.add_subcommand("synth", "Write a deterministic synthetic llama GGUF model");
  sub->description(
      "Write a deterministic synthetic llama GGUF model (random weights scaled to keep activations sane, "
      "a built-in SentencePiece-style English vocabulary) for benchmarks, demos and tests");
  sub->add_option("--preset", flags->preset,
                  "Model shape: tiny (tests), 1b (TinyLlama-1.1B), mistral-7b; mixtures of experts (8 experts, 2 used "
                  "per token): moe-tiny (tests), moe-mid (~0.64 B), mixtral-8x7b (~46.7 B)")
      ->capture_default_str();
  sub->add_option("--type", flags->type, "Type of the weight matrices: F16, Q8_0, Q4_0, Q4_K (norms stay F32)")
      ->capture_default_str();
  sub->add_option("-o,--output", flags->output, "Output GGUF file (overwritten)")->required();
  sub->add_option("--seed", flags->seed, "Seed of the weights (the same seed gives the same file)")
      ->capture_default_str();
  sub->add_option("--vocab-from", flags->vocab_from,
                  "Copy the tokenizer of this GGUF model instead of the built-in one (n_vocab follows it)");
  sub->add_option("--threads", flags->threads, "Threads generating and quantizing weights (0: all cores)")
      ->capture_default_str();
  sub->add_option("--activation", flags->activation,
                  "FFN activation: silu (SwiGLU), relu (ReGLU) or drelu (TurboSparse's relu(gate)*relu(up)); relu and "
                  "drelu models leave ~90% of FFN neurons inactive per token")
      ->capture_default_str();
  sub->add_flag("--predictor", flags->predictor,
                "Also write PowerInfer activation predictors (blk.N.fc1/fc2.weight, magic PWRI); relu/drelu only");
  sub->add_option("--predictor-rank", flags->predictor_rank, "Rank of the predictors (0: n_embd / 8)")
      ->capture_default_str();
  sub->add_option("--predictor-type", flags->predictor_type,
                  "Type of the predictor matrices: F16, Q8_0 or Q4_0 (quantized: 2-3.5x fewer bytes read per token)")
      ->capture_default_str();
  sub->add_flag("--down-transposed", flags->down_transposed,
                "Also write blk.N.ffn_down_t.weight (the down projection with one row per neuron); relu/drelu "
                "MoE presets always write ffn_down_t_exps in place of ffn_down_exps");
  sub->add_option("--layers", flags->layers,
                  "Layers (0: the preset's): the preset's shape with N layers, for experiments whose per-layer "
                  "work must be the full shape's on less disk and time")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}))
      ->capture_default_str();
  sub->add_flag("-q,--quiet", flags->quiet, "Print only the final summary line (progress goes to a terminal only)");
  sub->callback([flags, &exit_code] {
    const auto type = parse_type_name(flags->type);
    if (!type) throw std::invalid_argument("synth: --type " + flags->type + " is not a ggml type name");
    const auto activation = synth::parse_activation(flags->activation);
    if (!activation)
      throw std::invalid_argument("synth: --activation " + flags->activation + " is not one of silu, relu, drelu");
    synth::SynthOptions options;
    options.activation = *activation;
    options.predictor = flags->predictor;
    options.predictor_rank = flags->predictor_rank;
    const auto predictor_type = parse_type_name(flags->predictor_type);
    if (!predictor_type) throw CLI::ValidationError("--predictor-type", "unknown type " + flags->predictor_type);
    options.predictor_type = *predictor_type;
    options.down_transposed = flags->down_transposed;
    options.n_layers = flags->layers;
    options.preset = flags->preset;
    options.type = *type;
    options.output_path = flags->output;
    options.seed = flags->seed;
    options.vocab_from = flags->vocab_from;
    options.threads = flags->threads;
    const bool quiet = flags->quiet || !isatty(fileno(stderr));
    const auto result = synth::write_synth_model(options, [quiet](size_t done, size_t total) {
      if (!quiet && (done * 10 / total != (done - 1) * 10 / total || done == total))
        std::fprintf(stderr, "\rsynth: %zu/%zu tensors", done, total);
      if (!quiet && done == total) std::fprintf(stderr, "\n");
    });
    const std::string ffn = options.activation == FfnActivation::SiLU
                                ? ""
                                : std::string(", ffn ") + synth::activation_key_value(options.activation) +
                                      (options.predictor ? " + predictors" : "");
    const std::string experts = result.shape.is_moe() ? ", " + std::to_string(result.shape.n_experts) + " experts (" +
                                                            std::to_string(result.shape.n_experts_used) + " used)"
                                                      : "";
    std::printf("wrote %s: preset %s, %s%s%s, %.3f B params, vocab %lld, %.1f MB in %.1f s\n",
                options.output_path.c_str(), result.shape.preset.c_str(), std::string(type_name(options.type)).c_str(),
                ffn.c_str(), experts.c_str(),
                static_cast<double>(result.n_params) / 1e9, static_cast<long long>(result.shape.n_vocab),
                static_cast<double>(result.file_bytes) / 1e6, result.seconds);
    exit_code = 0;
  });
}

}  // namespace ember::cli
