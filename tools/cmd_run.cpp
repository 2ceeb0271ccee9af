// `ember run`: generate text for one prompt. stdout gets exactly the generated text; logs and
// timings go to stderr, so the output can be piped.
#include <cstdio>
#include <random>
#include <string>

#include "core/kernels/type_traits.h"
#include "core/model/generator.h"
#include "tools/model_options.h"
#include "tools/offload_report.h"
#include "tools/read_text_file.h"
#include "tools/sparse_report.h"
#include "tools/subcommands.h"

namespace ember::cli {
namespace {

struct RunOptions {
  ModelOptions model;
  std::string prompt;
  std::string prompt_file;
  int64_t n_predict = 128;
  SamplingParams sampling;
  bool seed_given = false;
  bool no_bos = false;
  bool print_token_ids = false;
  bool verbose = false;
  bool stats = false;
  std::string stats_json;
};

int run(RunOptions& o) {
  if (!o.prompt_file.empty()) o.prompt = read_text_file(o.prompt_file, "prompt file");
  if (!o.seed_given) o.sampling.seed = std::random_device{}();

  ThreadPool pool(o.model.threads);
  const std::string model_path = o.model.resolve_model_path();
  auto model = Model::load(model_path, o.model.load_options(model_path));
  const ModelConfig& c = model->config();
  std::fprintf(stderr, "ember: %s (%s), %lld layers, dim %lld, ffn %lld (%s), vocab %lld; %d threads, %s kernels\n",
               model_path.c_str(), c.architecture.c_str(), (long long)c.n_layer, (long long)c.n_embd,
               (long long)c.n_ff, activation_name(c.activation), (long long)c.n_vocab, pool.size(),
               kernel_set_name(active_kernel_set()));

  const Tokenizer& tok = model->tokenizer();
  std::vector<int32_t> prompt = tok.encode(o.prompt, /*add_special=*/!o.no_bos, /*parse_special=*/false);
  if (prompt.empty()) throw std::runtime_error("the prompt is empty and the model adds no BOS token");

  InferenceContext ctx(*model, pool, o.model.context_options(*model));
  Sampler sampler(o.sampling, static_cast<int32_t>(c.n_vocab));
  GenerationLimits limits;
  limits.max_tokens = o.n_predict;

  std::vector<int32_t> ids;
  GenerationStats stats;
  // The neuron cache's counters at the start, after the prompt (the first token's callback) and at
  // the end: prefill and decode are reported apart.
  const OffloadedFfn* offload = model->offloaded_ffn();
  const OffloadStats at_start = offload ? offload->stats() : OffloadStats{};
  OffloadStats after_prompt = at_start;
  bool prompt_done = false;
  try {
    stats = generate(ctx, sampler, prompt, limits, [&](int32_t id, std::string_view text) {
      if (!prompt_done) {
        prompt_done = true;
        if (offload) after_prompt = offload->stats();
      }
      if (o.print_token_ids) {
        if (id >= 0) ids.push_back(id);
      } else if (!text.empty()) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
      }
      return true;
    });
  } catch (const ContextOverflow& e) {
    throw std::runtime_error(std::string(e.what()) + " (raise --ctx-size or lower -n)");
  }
  if (o.print_token_ids) {
    std::string line = "[";
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
    std::printf("%s]\n", line.c_str());
  }
  std::fflush(stdout);
  std::fprintf(stderr, "\nember: prefill %lld tokens in %.3f s (%.2f tok/s); decode %lld tokens in %.3f s (%.2f tok/s); finish: %s; seed %llu\n",
               (long long)stats.prompt_tokens, stats.prefill_seconds, stats.prefill_tokens_per_s(),
               (long long)stats.decoded_tokens, stats.decode_seconds, stats.decode_tokens_per_s(),
               finish_reason_name(stats.finish), (unsigned long long)o.sampling.seed);
  if (has_sparse_report(ctx)) print_sparse_report(ctx, stderr);
  if (o.stats || !o.stats_json.empty()) {
    RunFigures f;
    f.prompt_tokens = stats.prompt_tokens;
    f.prefill_seconds = stats.prefill_seconds;
    f.decode_tokens = stats.decoded_tokens;
    f.decode_seconds = stats.decode_seconds;
    if (offload) {
      f.prefill_io = offload_stats_between(at_start, after_prompt);
      f.decode_io = offload_stats_between(after_prompt, offload->stats());
    }
    const nlohmann::json j = stats_json(*model, ctx, f);
    if (o.stats) print_stats(j, stderr);
    if (!o.stats_json.empty()) write_stats_json(o.stats_json, j);
  }
  return 0;
}

}  // namespace

void register_run(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run", "Generate text for a prompt (text to stdout, logs to stderr)");
  opts->model.demo_if_missing = true;
  opts->model.add_to(*sub);
  opts->model.add_sparse_to(*sub);
  opts->model.add_memory_to(*sub);
  sub->add_flag("--stats", opts->stats, "Print speed, memory and neuron-cache statistics to stderr");
  sub->add_option("--stats-json", opts->stats_json,
                  "Write the statistics as JSON to FILE (decode_tokens_per_s, cache_hit_rate, bytes_read_per_token, "
                  "io_read_mib_per_s, peak_rss_bytes, ...)");
  auto* p = sub->add_option("-p,--prompt", opts->prompt, "Prompt text");
  auto* f = sub->add_option("-f,--file", opts->prompt_file, "Read the prompt from a file")->check(CLI::ExistingFile);
  p->excludes(f);
  sub->add_option("-n,--n-predict", opts->n_predict, "Tokens to generate (default 128)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  sub->add_option("--temp", opts->sampling.temperature, "Temperature; 0 = greedy (default 0.8)")
      ->check(CLI::Range(0.0f, 100.0f));
  sub->add_option("--top-k", opts->sampling.top_k, "Keep the K most likely tokens; 0 = off (default 40)")
      ->check(CLI::Range(0, 1 << 24));
  sub->add_option("--top-p", opts->sampling.top_p, "Nucleus sampling mass; 1 = off (default 0.95)")
      ->check(CLI::Range(0.0f, 1.0f));
  sub->add_option("--min-p", opts->sampling.min_p, "Drop tokens below min-p x the top probability; 0 = off (default 0.05)")
      ->check(CLI::Range(0.0f, 1.0f));
  sub->add_option("--repeat-penalty", opts->sampling.repeat_penalty, "Penalty for repeated tokens; 1 = off (default 1)")
      ->check(CLI::Range(0.0f, 10.0f));
  sub->add_option("--repeat-last-n", opts->sampling.penalty_last_n, "Tokens considered by the penalties (default 64)")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--presence-penalty", opts->sampling.presence_penalty, "OpenAI presence penalty (default 0)")
      ->check(CLI::Range(-2.0f, 2.0f));
  sub->add_option("--frequency-penalty", opts->sampling.frequency_penalty, "OpenAI frequency penalty (default 0)")
      ->check(CLI::Range(-2.0f, 2.0f));
  sub->add_option_function<uint64_t>("-s,--seed", [opts](uint64_t s) { opts->sampling.seed = s; opts->seed_given = true; },
                                     "Random seed (default: random, printed at the end)");
  sub->add_flag("--no-bos", opts->no_bos, "Do not add the BOS token even if the model asks for it");
  sub->add_flag("--print-token-ids", opts->print_token_ids,
                "Print the generated token ids as one JSON array instead of the text");
  sub->callback([opts, &exit_code] {
    if (opts->prompt.empty() && opts->prompt_file.empty()) throw std::runtime_error("no prompt: give -p TEXT or -f FILE");
    exit_code = run(*opts);
  });
}

}  // namespace ember::cli
