#pragma once
// The engine thread: the one place that runs the model. It owns the Model, a ThreadPool and
// `slots` InferenceContexts (one KV cache each). Jobs wait in a bounded FIFO queue, enter free
// slots in order, and the active ones advance round-robin one forward pass each (a prefill chunk
// of at most ContextOptions::max_batch tokens, or one generated token), so concurrent streams
// progress together; with one slot that is plain FIFO. Each job has its own sampler, so a seeded
// job gives the same text however it is interleaved. The engine never touches sockets: results
// reach the HTTP side only through the job's callbacks, which post them to the connection.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/cache/cache_supervisor.h"
#include "core/grammar/grammar.h"
#include "core/grammar/token_trie.h"
#include "core/kernels/thread_pool.h"
#include "core/model/generator.h"
#include "core/model/inference_context.h"
#include "core/model/model.h"
#include "core/sampling/sampler.h"

namespace ember::server {

// One generated token's log-probability and its most likely alternatives, as text (the token's
// bytes, which may be part of a UTF-8 sequence).
struct TokenAlternative {
  std::string token;
  float logprob = 0.0f;
};
// chosen.logprob is NaN for a prompt's first token (echo): nothing precedes it to predict it.
struct TokenLogprobs {
  TokenAlternative chosen;
  std::vector<TokenAlternative> top;
};

struct GenerationJob {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int64_t max_tokens = 16;
  // Stop sequences: the generation ends (FinishReason::StopSequence) when the text contains one;
  // it and what follows are not sent to on_text.
  std::vector<std::string> stop;
  // Constrained decoding: the output is a string of this grammar; null: unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar;
  // Log-probabilities: -1 none; else every generated token's is passed to on_logprobs (before its
  // text reaches on_text), with this many alternatives.
  int top_logprobs = -1;
  // n: choices generated one after another from the same prompt in the same slot, so the prompt is
  // evaluated once (each later choice re-evaluates only its last token, whose logits start it);
  // choice i samples with seed + i. Every callback below refers to the current choice;
  // on_choice_end runs after each choice but the last, on_done after the last (or when one fails
  // or is cancelled: the rest are not generated).
  int choices = 1;
  std::function<void(const GenerationStats& stats)> on_choice_end;
  // Several prompts (/v1/completions): after `prompt`'s choices, each of these in turn becomes the
  // prompt and gets `choices` more in the same slot (seeds again from sampling.seed), its shared
  // prefix with what the slot holds reused; on_choice_end separates every two choices.
  std::vector<std::vector<int32_t>> later_prompts;
  // Echo with log-probabilities: >= 0 asks for the log-probabilities of each prompt's tokens from
  // this position on, reported once per prompt (with its first choice, before its first generated
  // token) through on_prompt_logprobs, `top_logprobs` alternatives each. The prompt is then
  // evaluated one token per step with no cached prefix (core/model/sequence_generator.h).
  int64_t prompt_logprobs_from = -1;
  std::function<void(std::vector<TokenLogprobs> prompt)> on_prompt_logprobs;
  // Set by the connection when its client went away; the generation then stops within one step
  // (a token or a prefill chunk) and its slot is freed; a queued job is dropped.
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
  // Both run on the engine thread and must only hand their data over (e.g. post to an executor).
  std::function<void(std::string_view text)> on_text;
  std::function<void(TokenLogprobs logprobs)> on_logprobs;
  // Always called exactly once per accepted job; `error` is null on success. A job cancelled
  // before it started reports FinishReason::Cancelled with zero tokens.
  std::function<void(const GenerationStats& stats, std::exception_ptr error)> on_done;
  // Kept until the job is gone (after on_done): the server's hold on the model it runs on.
  std::shared_ptr<const void> hold;
};

// A consistent snapshot of the engine's counters and gauges, for /metrics.
struct EngineMetrics {
  // gauges
  size_t queued_jobs = 0;         // waiting for a slot
  size_t active_jobs = 0;         // in a slot (prefilling or decoding)
  int slots = 0;
  uint64_t kv_cache_bytes = 0;    // all slots
  uint64_t model_bytes = 0;       // weights resident (mapped or read)
  // counters since start
  uint64_t jobs_completed = 0;    // finished normally (length, end of generation, stop sequence)
  uint64_t jobs_cancelled = 0;    // the client went away, timed out, or the server stopped
  uint64_t jobs_failed = 0;       // an exception in the engine
  uint64_t prompt_tokens = 0;     // tokens in accepted prompts
  uint64_t prefill_tokens = 0;    // tokens actually evaluated for prompts (prefix reuse skips some)
  uint64_t reused_prompt_tokens = 0;  // prompt tokens served from a slot's cache
  uint64_t generated_tokens = 0;
  double prefill_seconds = 0;     // time spent evaluating prompts
  double decode_seconds = 0;      // time spent evaluating and sampling generated tokens
  // Sparse FFN of decode steps (core/sparse), counted when the mode is not dense or diagnostics
  // are on (`sparse_counted`): every slot's InferenceContext::sparse_totals() summed, as of the
  // engine's last round of steps. sparse_mode is a static string (sparse_mode_name()).
  bool sparse_counted = false;
  bool sparse_diagnostics = false;  // truly_active / true_positive are meaningful
  const char* sparse_mode = "dense";
  uint64_t sparse_decode_tokens = 0;  // decode steps (sparse_totals.tokens counts them once per layer)
  SparseLayerStats sparse_totals;
  // The neuron cache under a memory budget (Model::offloaded_ffn(); `offloaded` false: none), as of
  // the engine's last round of steps.
  bool offloaded = false;
  uint64_t memory_budget_bytes = 0;
  uint64_t memory_resident_bytes = 0;  // the plan's total: resident weights + hot neurons + cold slots
  uint64_t memory_io_buffer_bytes = 0; // read buffers, outside the budget
  OffloadStats offload;                // cumulative since load (OffloadedFfn::stats())
  uint64_t replan_runs = 0;            // re-plans the engine ran
  uint64_t replans = 0;                // ... of which changed the hot set (OffloadedFfn::replans())
  uint64_t replan_failures = 0;
  // Memory-pressure elasticity (request_cache_budget): the configured budget, and the changes.
  uint64_t memory_configured_budget_bytes = 0;
  uint64_t memory_budget_shrinks = 0, memory_budget_regrowths = 0, memory_resize_failures = 0;
  // A mixture of experts (moe_n_expert > 0): every slot's routing summed, as of the engine's last
  // round. moe_expert_routed[layer * n_expert + e]: tokens routed to expert e in that layer;
  // consecutive tokens of a sequence (pairs), how many of them share their first choice / any expert.
  int64_t moe_n_expert = 0;
  std::vector<uint64_t> moe_expert_routed;
  uint64_t moe_pairs = 0, moe_top1_repeats = 0, moe_overlaps = 0;
};

struct EngineOptions {
  int threads = 0;                // ThreadPool size; 0: one per physical core
  ContextOptions context;
  size_t max_queued_jobs = 16;    // jobs waiting (not counting the running ones)
  int slots = 1;                  // sequences generated together (one KV cache each), token by token
  // A new job goes to the free slot whose cached tokens share the longest prefix with its prompt
  // and evaluates only the rest (results are the same as from an empty cache).
  bool reuse_prefix = true;
  // Under a memory budget (the model has an OffloadedFfn), both ignored otherwise:
  // the file the live activation counts are loaded from at start (when it exists) and saved to
  // after each re-plan and at stop(); "": neither.
  std::string activation_state;
  // Re-plan the hot set (OffloadedFfn::replan()) when a job finishes and at least this many tokens
  // were decoded since the last re-plan; 0: never.
  uint64_t replan_tokens = 8192;
  // Lines for the operator (startup plan, state file, re-plan failures), without a trailing newline;
  // empty: "ember: LINE" on stderr. Called on the constructing thread and on the engine thread.
  std::function<void(const std::string& line)> log;
  static constexpr int kMaxSlots = 256;
};

class EngineWorker {
 public:
  // Throws std::invalid_argument when options.slots is outside [1, kMaxSlots].
  EngineWorker(std::unique_ptr<Model> model, const EngineOptions& options);
  ~EngineWorker();  // stop() and join
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // Queues the job; false when the queue is full or the worker is stopping (the job is dropped
  // and its callbacks are never called).
  bool try_submit(GenerationJob job);
  // Ends the running jobs (FinishReason::Cancelled, no error), fails the queued ones with the
  // error "the server is shutting down" and joins the thread. Idempotent.
  void stop();

  const Model& model() const { return *model_; }
  int64_t n_ctx() const { return n_ctx_; }
  int threads() const { return pool_.size(); }
  // Jobs queued or running.
  size_t pending() const;
  // Thread-safe; counters include everything up to the engine's last round of steps.
  EngineMetrics metrics() const;

  // Memory-pressure elasticity (server/memory_pressure.h): asks for the neuron cache to be planned
  // for `bytes` (0: the configured budget; raised to the pack's minimum), applied on the engine
  // thread between steps (streams pause while the cache is rebuilt) and logged with `reason`. A
  // later request replaces one not yet applied. Thread-safe; no-op without a memory budget.
  void request_cache_budget(uint64_t bytes, std::string reason);
  // Without a memory budget both are 0.
  uint64_t configured_cache_budget() const { return configured_budget_; }
  uint64_t minimum_cache_budget() const { return minimum_budget_; }

 private:
  struct Slot;  // one KV cache, the tokens in it and the job it runs (engine_worker.cpp)

  void loop();
  // One round: wait for work, admit jobs, start the new ones, step every active slot, re-plan
  // when due. False when the worker is stopping.
  bool run_round(std::vector<GenerationJob>& cancelled);
  // An exception escaped a round (a bug, or memory exhausted): logs it and fails the jobs in the
  // slots (their caches reset), so the engine thread goes on serving instead of std::terminate.
  void recover(std::exception_ptr error);
  void finish_noexcept(Slot& slot, std::exception_ptr error) noexcept;
  // Under mu_: moves cancelled queued jobs to `out` and queued jobs into free slots (FIFO).
  void admit_locked(std::vector<GenerationJob>& cancelled_out);
  size_t pick_slot(const std::vector<int32_t>& prompt, int64_t& reuse) const;
  void start(Slot& slot);
  void step(Slot& slot);
  // The slot's choice ended normally and its job asks for more: hands its stats over and makes
  // the slot start the next choice (next round) from the prompt already in its cache.
  void next_choice(Slot& slot);
  // The generator's on_sampled for a job that asked for log-probabilities.
  std::function<void(int32_t, std::span<const float>)> logprobs_reporter(Slot& slot) const;
  // Echo: the generator's on_prompt_logits, collecting the prompt's log-probabilities in the slot
  // and handing them to the job once the last one is known.
  std::function<void(int64_t, std::span<const float>)> prompt_logprobs_reporter(Slot& slot) const;
  TokenLogprobs token_logprobs_of(int32_t token, std::span<const float> logits, int top) const;
  void finish(Slot& slot, std::exception_ptr error);
  // Moves what the slot's generator did since the last call into unpublished_.
  void account(Slot& slot);
  // Adds the engine thread's not yet published counters to metrics_ (under mu_), and copies the
  // slots' sparse counters (engine thread only: the contexts are not touched by anyone else).
  void publish_locked();
  void publish_routing_locked();
  void log(const std::string& line) const;

  std::unique_ptr<Model> model_;
  ThreadPool pool_;
  EngineOptions options_;
  std::vector<std::unique_ptr<Slot>> slots_;
  int64_t n_ctx_ = 0;
  uint64_t kv_cache_bytes_ = 0;
  uint64_t use_clock_ = 0;  // engine thread: orders slots by last use (least recently used wins ties)
  EngineMetrics unpublished_;  // engine thread only: counter deltas since the last publish_locked()
  // Under a memory budget: the neuron cache's supervisor (re-plans, saved counts, its counters);
  // engine thread only once the thread runs. Null without a budget.
  std::unique_ptr<cache::CacheSupervisor> cache_;
  uint64_t configured_budget_ = 0, minimum_budget_ = 0;
  // The vocabulary as a byte trie for constrained decoding: built on the engine thread by the first
  // job with a grammar (tens of milliseconds), then shared by every such job.
  std::shared_ptr<const grammar::TokenTrie> trie_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenerationJob> queue_;
  bool stopping_ = false;
  size_t active_ = 0;      // slots holding a job
  // request_cache_budget() not yet applied: the budget and why.
  std::optional<std::pair<uint64_t, std::string>> budget_request_;
  EngineMetrics metrics_;  // counters (gauges are filled in by metrics())
  std::thread thread_;
};

}  // namespace ember::server
