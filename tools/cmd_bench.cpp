// `ember bench`: prefill and decode speed of one model, in-process, medians over several runs.
// Prints one JSON line with the same keys as bench/llamacpp's peer so scripts can put the two side
// by side. The prompt is synthetic (fixed ids) unless --prompt-file gives a text: dense speed does
// not depend on the text, but a sparse model's does (which neurons and experts fire), and a hot set
// chosen on one text must be measured on another.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/kernels/type_traits.h"
#include "core/model/inference_context.h"
#include "core/sampling/sampler.h"
#include "tools/model_options.h"
#include "tools/offload_report.h"
#include "tools/read_text_file.h"
#include "tools/sparse_report.h"
#include "tools/subcommands.h"

namespace ember::cli {
namespace {

struct BenchOptions {
  ModelOptions model;
  int64_t prompt_tokens = 512;
  std::string prompt_file;  // empty: the synthetic prompt
  int64_t gen_tokens = 64;
  int runs = 3;
  bool json = false;
  std::string stats_json;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// BOS, then ids spread over the ordinary part of the vocabulary (past the control and byte tokens
// of SentencePiece vocabularies). bench/llamacpp/peer_bench uses the same sequence.
std::vector<int32_t> synthetic_prompt(const Tokenizer& tok, int64_t n) {
  std::vector<int32_t> ids;
  const int32_t n_vocab = tok.n_vocab();
  const int32_t base = n_vocab > 1000 ? 300 : 0;
  if (tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  for (int64_t i = static_cast<int64_t>(ids.size()); i < n; ++i) {
    ids.push_back(base + static_cast<int32_t>((i * 37) % (n_vocab - base)));
  }
  return ids;
}

// The first n tokens of a text file (BOS first when the model adds one, as `ember run` encodes a
// prompt); peer_bench --prompt-file cuts the same text the same way. A text shorter than n tokens
// is an error: the prompt length is part of what is measured.
std::vector<int32_t> text_prompt(const Tokenizer& tok, const std::string& path, int64_t n) {
  const std::string text = read_text_file(path, "prompt file");
  std::vector<int32_t> ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  if (static_cast<int64_t>(ids.size()) < n) {
    throw std::runtime_error("the prompt file '" + path + "' has " + std::to_string(ids.size()) +
                             " tokens, fewer than --prompt-tokens " + std::to_string(n));
  }
  ids.resize(static_cast<size_t>(n));
  return ids;
}

int bench(const BenchOptions& o) {
  using Clock = std::chrono::steady_clock;
  ThreadPool pool(o.model.threads);
  const auto t_load = Clock::now();
  auto model = Model::load(o.model.model_path, o.model.load_options(o.model.model_path));
  const double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();

  ContextOptions copts = o.model.context_options(*model);
  copts.n_ctx = std::max<int64_t>(copts.n_ctx, o.prompt_tokens + o.gen_tokens);
  copts.max_batch = std::max<int64_t>(copts.max_batch, o.prompt_tokens);
  InferenceContext ctx(*model, pool, copts);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  Sampler sampler(greedy, static_cast<int32_t>(model->config().n_vocab));
  const std::vector<int32_t> prompt = o.prompt_file.empty()
                                           ? synthetic_prompt(model->tokenizer(), o.prompt_tokens)
                                           : text_prompt(model->tokenizer(), o.prompt_file, o.prompt_tokens);

  std::vector<double> prefill, decode;
  // Neuron-cache counters of the measured runs, prefill and decode apart (--stats-json).
  const OffloadedFfn* offload = model->offloaded_ffn();
  RunFigures figures;
  for (int run = -1; run < o.runs; ++run) {  // run -1 is the warm-up (page cache, CPU clocks)
    ctx.reset();
    if (run == 0) ctx.reset_sparse_stats();  // the report covers the measured runs only
    const OffloadStats s0 = offload ? offload->stats() : OffloadStats{};
    const auto t0 = Clock::now();
    const float* logits = ctx.eval(prompt);
    const double tp = std::chrono::duration<double>(Clock::now() - t0).count();
    const OffloadStats s1 = offload ? offload->stats() : OffloadStats{};
    const auto t1 = Clock::now();
    for (int64_t i = 0; i < o.gen_tokens; ++i) {
      // No token at all means logits that are all NaN (nothing is banned here): timings of such a
      // model mean nothing, so say so rather than decode a stand-in token.
      const std::optional<int32_t> next = sampler.sample(logits);
      if (!next) throw std::runtime_error("no token could be sampled: every logit is NaN or -inf");
      logits = ctx.eval(std::span<const int32_t>(&*next, 1));
    }
    const double td = std::chrono::duration<double>(Clock::now() - t1).count();
    if (run >= 0) {
      if (offload) {
        add_offload_stats(figures.prefill_io, offload_stats_between(s0, s1));
        add_offload_stats(figures.decode_io, offload_stats_between(s1, offload->stats()));
      }
      figures.prompt_tokens += static_cast<int64_t>(prompt.size());
      figures.prefill_seconds += tp;
      figures.decode_tokens += o.gen_tokens;
      figures.decode_seconds += td;
    }
    const double pps = static_cast<double>(prompt.size()) / tp, dps = static_cast<double>(o.gen_tokens) / td;
    std::fprintf(stderr, "ember bench: %s prefill %.2f tok/s, decode %.2f tok/s\n", run < 0 ? "warm-up" : "run", pps, dps);
    if (run >= 0) {
      prefill.push_back(pps);
      decode.push_back(dps);
    }
  }

  nlohmann::json j = {
      {"engine", "ember"},
      {"model", o.model.model_path},
      {"threads", pool.size()},
      {"kernels", kernel_set_name(active_kernel_set())},
      {"prompt_tokens", static_cast<int64_t>(prompt.size())},
      {"prompt", o.prompt_file.empty() ? std::string("synthetic") : o.prompt_file},
      {"gen_tokens", o.gen_tokens},
      {"runs", o.runs},
      {"prefill_tokens_per_s", median(prefill)},
      {"decode_tokens_per_s", median(decode)},
      {"prefill_runs", prefill},
      {"decode_runs", decode},
      {"load_s", load_s},
  };
  j["sparse"] = sparse_report_json(ctx);
  if (has_sparse_report(ctx)) print_sparse_report(ctx, stderr);
  if (!o.stats_json.empty()) {
    nlohmann::json stats = stats_json(*model, ctx, figures);
    // Medians, as in the JSON line; the cache counters are sums over the measured runs.
    stats["decode_tokens_per_s"] = median(decode);
    stats["prefill_tokens_per_s"] = median(prefill);
    stats["ttft_ms"] = 1000.0 * static_cast<double>(prompt.size()) / median(prefill);
    stats["runs"] = o.runs;
    write_stats_json(o.stats_json, stats);
    j["stats_json"] = o.stats_json;
  }
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("model %s, %d threads: prefill %lld tokens %.2f tok/s, decode %lld tokens %.2f tok/s (medians of %d)\n",
                o.model.model_path.c_str(), pool.size(), (long long)prompt.size(), median(prefill),
                (long long)o.gen_tokens, median(decode), o.runs);
  }
  return 0;
}

}  // namespace

void register_bench(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Measure prefill and decode tokens/s of a model (medians of several runs)");
  o->model.add_to(*sub);
  o->model.add_sparse_to(*sub);
  o->model.add_memory_to(*sub);
  sub->add_option("--stats-json", o->stats_json,
                  "Write speed, memory and neuron-cache statistics of the measured runs as JSON to FILE");
  sub->add_option("--prompt-tokens", o->prompt_tokens, "Prompt length for the prefill measurement (default 512)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--prompt-file", o->prompt_file,
                  "Prompt from this text file, cut to --prompt-tokens tokens (default: a fixed spread of token ids)")
      ->check(CLI::ExistingFile);
  sub->add_option("--gen-tokens", o->gen_tokens, "Tokens decoded one at a time (default 64)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--runs", o->runs, "Measured runs after one warm-up (default 3)")->check(CLI::Range(1, 1000));
  sub->add_flag("--json", o->json, "Print one JSON line (keys shared with the llama.cpp peer)");
  sub->callback([o, &exit_code] { exit_code = bench(*o); });
}

}  // namespace ember::cli
