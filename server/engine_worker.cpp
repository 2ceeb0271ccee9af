#include "server/engine_worker.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/grammar/grammar_constraint.h"
#include "core/model/routing_stats.h"
#include "core/sampling/token_logprobs.h"
#include "core/model/sequence_generator.h"

namespace ember::server {

// A slot is one sequence's home: its KV cache, the tokens whose keys and values that cache holds
// (for prefix reuse), and the job it is running. Slots never move (held by unique_ptr), so the
// generator may keep references to the context and the sampler.
struct EngineWorker::Slot {
  Slot(const Model& model, ThreadPool& pool, const ContextOptions& options)
      : routes(model.config().is_moe() ? std::make_unique<RoutingStats>(model.config().n_layer, model.config().n_expert,
                                                                        model.config().n_expert_used)
                                       : nullptr),
        ctx(model, pool, with_routes(options, routes.get())) {
    // Prompt + max_tokens never exceed the context, so recording tokens never reallocates.
    cached.reserve(static_cast<size_t>(ctx.n_ctx()));
  }
  static ContextOptions with_routes(ContextOptions o, RoutingStats* routes) {
    o.moe_observer = routes;
    return o;
  }

  // A mixture of experts' routing in this slot (null for a dense model), for /metrics. One per
  // slot: consecutive tokens pair up within a sequence, never across slots.
  std::unique_ptr<RoutingStats> routes;
  InferenceContext ctx;
  // cached[i] is the token at position i of ctx, for i < ctx.n_past(). While a job runs it runs
  // ahead: the whole prompt and every sampled token are appended before they are evaluated.
  std::vector<int32_t> cached;
  uint64_t last_used = 0;

  // The running job (all empty when the slot is free).
  std::optional<GenerationJob> job;
  int64_t reuse = 0;  // prompt tokens the job takes from `cached`
  int choice = 0;     // of job->choices, for the current prompt
  std::vector<TokenLogprobs> prompt_logprobs;  // echo: the current prompt's, while it is evaluated
  std::optional<Sampler> sampler;
  std::unique_ptr<grammar::GrammarConstraint> constraint;  // the job's grammar, if any
  std::optional<SequenceGenerator> seq;
  TokenSink sink;
  GenerationStats published;  // what of seq->stats() is already in the counters
};

namespace {

int64_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const auto n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int64_t>(i);
}

void call_on_done(GenerationJob& job, const GenerationStats& stats, std::exception_ptr error) {
  if (!job.on_done) return;
  try {
    job.on_done(stats, error);
  } catch (...) {
    // A callback that throws must not take the engine thread down; the connection times out.
  }
}

GenerationStats cancelled_stats(const GenerationJob& job) {
  GenerationStats stats;
  stats.prompt_tokens = static_cast<int64_t>(job.prompt.size());
  stats.finish = FinishReason::Cancelled;
  return stats;
}

void add_counters(EngineMetrics& to, const EngineMetrics& from) {
  to.jobs_completed += from.jobs_completed;
  to.jobs_cancelled += from.jobs_cancelled;
  to.jobs_failed += from.jobs_failed;
  to.prompt_tokens += from.prompt_tokens;
  to.prefill_tokens += from.prefill_tokens;
  to.reused_prompt_tokens += from.reused_prompt_tokens;
  to.generated_tokens += from.generated_tokens;
  to.prefill_seconds += from.prefill_seconds;
  to.decode_seconds += from.decode_seconds;
}

}  // namespace

EngineWorker::EngineWorker(std::unique_ptr<Model> model, const EngineOptions& options)
    : model_(std::move(model)), pool_(options.threads), options_(options) {
  if (options.slots < 1 || options.slots > EngineOptions::kMaxSlots) {
    throw std::invalid_argument("slots must be between 1 and " + std::to_string(EngineOptions::kMaxSlots) +
                                ", got " + std::to_string(options.slots));
  }
  for (int i = 0; i < options.slots; ++i) {
    slots_.push_back(std::make_unique<Slot>(*model_, pool_, options.context));
    kv_cache_bytes_ += slots_.back()->ctx.kv_cache_bytes();
  }
  n_ctx_ = slots_.front()->ctx.n_ctx();
  if (model_->config().is_moe()) {
    metrics_.moe_n_expert = model_->config().n_expert;
    metrics_.moe_expert_routed.assign(static_cast<size_t>(model_->config().n_layer * model_->config().n_expert), 0);
  }
  const SparseOptions& sparse = options.context.sparse;
  metrics_.sparse_counted = sparse.mode != SparseOptions::Mode::Dense || sparse.diagnostics;
  metrics_.sparse_diagnostics = sparse.diagnostics;
  metrics_.sparse_mode = sparse_mode_name(sparse.mode);
  if (OffloadedFfn* offloaded = model_->offloaded_ffn()) {
    cache_ = std::make_unique<cache::CacheSupervisor>(
        *offloaded, cache::CacheSupervisorOptions{options.activation_state, options.replan_tokens,
                                                   [this](const std::string& line) { log(line); }});
    const cache::CacheCounters counters = cache_->counters();
    metrics_.offloaded = true;
    metrics_.memory_budget_bytes = counters.budget_bytes;
    metrics_.memory_configured_budget_bytes = offloaded->configured_budget_bytes();
    metrics_.memory_io_buffer_bytes = counters.io_buffer_bytes;
    configured_budget_ = offloaded->configured_budget_bytes();
    minimum_budget_ = offloaded->plan().minimum_bytes;
  }
  thread_ = std::thread([this] { loop(); });
}

void EngineWorker::log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "ember: %s\n", line.c_str());
  }
}

EngineWorker::~EngineWorker() { stop(); }

bool EngineWorker::try_submit(GenerationJob job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= options_.max_queued_jobs) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

size_t EngineWorker::pending() const {
  std::lock_guard lock(mu_);
  return queue_.size() + active_;
}

EngineMetrics EngineWorker::metrics() const {
  std::lock_guard lock(mu_);
  EngineMetrics m = metrics_;
  m.queued_jobs = queue_.size();
  m.active_jobs = active_;
  m.slots = static_cast<int>(slots_.size());
  m.kv_cache_bytes = kv_cache_bytes_;
  // Weights as bound (mapped or read) plus the kernels' repacked copies.
  m.model_bytes = model_->weights().resident_bytes() + model_->weights().repacked_bytes();
  return m;
}

void EngineWorker::stop() {
  std::deque<GenerationJob> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  const bool was_running = thread_.joinable();
  if (was_running) thread_.join();
  // The engine thread is gone: nothing else touches the cache now. Saved once, on the stop that
  // ended the thread (SIGTERM in `ember serve`), so a restart begins warm.
  if (was_running && cache_ && !cache_->state_path().empty()) {
    if (cache_->save()) log("activation counts saved to " + cache_->state_path());
  }
  for (auto& job : dropped) {
    GenerationStats stats = cancelled_stats(job);
    call_on_done(job, stats, std::make_exception_ptr(std::runtime_error("the server is shutting down")));
  }
}

void EngineWorker::publish_locked() {
  add_counters(metrics_, unpublished_);
  unpublished_ = EngineMetrics{};
  if (cache_) {
    // Copied here, on the engine thread between steps, so a scrape never waits for a layer step.
    const cache::CacheCounters counters = cache_->counters();
    metrics_.replan_runs = counters.replan_runs;
    metrics_.replan_failures = counters.replan_failures;
    metrics_.offload = counters.offload;
    metrics_.replans = counters.replans;
    metrics_.memory_resident_bytes = counters.resident_bytes;
    metrics_.memory_budget_bytes = counters.budget_bytes;
    metrics_.memory_budget_shrinks = counters.budget_shrinks;
    metrics_.memory_budget_regrowths = counters.budget_regrowths;
    metrics_.memory_resize_failures = counters.resize_failures;
  }
  if (!metrics_.moe_expert_routed.empty()) publish_routing_locked();
  if (!metrics_.sparse_counted) return;
  // The contexts' counters are cumulative since construction (nothing here resets them), so the
  // sum is the total; n_layer * slots additions per round, no allocation.
  SparseLayerStats total;
  uint64_t tokens = 0;
  for (const auto& slot : slots_) {
    total += slot->ctx.sparse_totals();
    if (!slot->ctx.sparse_stats().empty()) tokens += slot->ctx.sparse_stats().front().tokens;
  }
  metrics_.sparse_totals = total;
  metrics_.sparse_decode_tokens = tokens;
}

void EngineWorker::publish_routing_locked() {
  // Sums of the slots' cumulative counts: assigned in place, no allocation.
  std::fill(metrics_.moe_expert_routed.begin(), metrics_.moe_expert_routed.end(), 0);
  metrics_.moe_pairs = metrics_.moe_top1_repeats = metrics_.moe_overlaps = 0;
  const auto n_expert = static_cast<size_t>(model_->config().n_expert);
  for (const auto& slot : slots_) {
    const auto& layers = slot->routes->layers();
    for (size_t l = 0; l < layers.size(); ++l) {
      for (size_t e = 0; e < n_expert; ++e) metrics_.moe_expert_routed[l * n_expert + e] += layers[l].expert_slots[e];
      metrics_.moe_pairs += layers[l].pairs;
      metrics_.moe_top1_repeats += layers[l].top1_repeats;
      metrics_.moe_overlaps += layers[l].overlaps;
    }
  }
}

void EngineWorker::loop() {
  std::vector<GenerationJob> cancelled;
  for (;;) {
    try {
      if (!run_round(cancelled)) break;
    } catch (...) {
      // Each job's errors are caught where its step runs (start, step); nothing else in a round
      // is expected to throw. Whatever does must not end the engine thread (an exception leaving
      // it is std::terminate: the daemon would die with every client's request): fail the jobs
      // in the slots, which resets their caches, and keep serving.
      recover(std::current_exception());
    }
  }
  // Shutting down: the running generations end here, as cancelled (their clients get what was
  // generated so far); the queued ones are failed by stop().
  for (auto& slot : slots_) {
    if (!slot->job) continue;
    std::exception_ptr error;
    try {
      if (slot->seq) slot->seq->cancel(slot->sink);  // hands over text held back for stop strings
    } catch (...) {
      error = std::current_exception();
    }
    finish_noexcept(*slot, error);
  }
  std::lock_guard lock(mu_);
  publish_locked();
}

bool EngineWorker::run_round(std::vector<GenerationJob>& cancelled) {
  std::optional<std::pair<uint64_t, std::string>> budget;
  {
    std::unique_lock lock(mu_);
    publish_locked();
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || active_ > 0 || budget_request_; });
    if (stopping_) return false;
    admit_locked(cancelled);
    if (budget_request_) {
      budget = std::move(budget_request_);
      budget_request_.reset();
    }
  }
  for (auto& job : cancelled) call_on_done(job, cancelled_stats(job), nullptr);
  cancelled.clear();
  // Newly admitted jobs start first (tokens are checked, samplers built), then every active
  // slot advances by one forward pass. Slots are visited in a fixed order; each gets one step
  // per round, which is what makes the interleaving fair.
  for (auto& slot : slots_) {
    if (slot->job && !slot->seq) start(*slot);
  }
  for (auto& slot : slots_) {
    if (slot->seq) step(*slot);
  }
  // Between steps, after a job ended: no forward pass is in flight, so the cache can be rebuilt.
  // Other slots' streams pause for it.
  if (cache_) cache_->replan_if_due();
  if (cache_ && budget) cache_->resize(budget->first, budget->second);
  return true;
}

void EngineWorker::request_cache_budget(uint64_t bytes, std::string reason) {
  if (!cache_) return;
  {
    std::lock_guard lock(mu_);
    budget_request_.emplace(bytes, std::move(reason));
  }
  cv_.notify_all();
}

void EngineWorker::recover(std::exception_ptr error) {
  std::string what = "unknown error";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  try {
    log("error: the engine's round failed outside any job (" + what + "); failing the running jobs and serving on");
  } catch (...) {
    // The log callback failing too must not take the engine thread down.
  }
  for (auto& slot : slots_) {
    if (slot->job) finish_noexcept(*slot, error);
  }
}

void EngineWorker::finish_noexcept(Slot& slot, std::exception_ptr error) noexcept {
  try {
    finish(slot, error);
  } catch (...) {
    // finish() itself failed part-way: make the slot free and empty by force. Its job's callback
    // may not have run; the connection then times out, which beats losing the engine.
    slot.seq.reset();
    slot.sampler.reset();
    slot.constraint.reset();
    slot.sink = nullptr;
    slot.cached.clear();
    slot.ctx.reset();
    slot.choice = 0;
    if (slot.job) {
      slot.job.reset();
      std::lock_guard lock(mu_);
      --active_;
    }
  }
}

void EngineWorker::admit_locked(std::vector<GenerationJob>& cancelled_out) {
  // A job whose client went away while queued frees its queue place now, not when a slot opens.
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->cancelled && it->cancelled->load()) {
      cancelled_out.push_back(std::move(*it));
      it = queue_.erase(it);
      ++metrics_.jobs_cancelled;  // counted before its on_done runs, like every finished job
    } else {
      ++it;
    }
  }
  while (!queue_.empty() && active_ < slots_.size()) {
    int64_t reuse = 0;
    Slot& slot = *slots_[pick_slot(queue_.front().prompt, reuse)];
    slot.job.emplace(std::move(queue_.front()));
    queue_.pop_front();
    slot.reuse = reuse;
    slot.last_used = ++use_clock_;
    ++active_;
  }
}

size_t EngineWorker::pick_slot(const std::vector<int32_t>& prompt, int64_t& reuse) const {
  size_t best = slots_.size();
  int64_t best_reuse = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = *slots_[i];
    if (s.job) continue;
    // The last prompt token is always evaluated: its logits choose the first generated token.
    int64_t r = 0;
    if (options_.reuse_prefix && !prompt.empty()) {
      r = std::min(common_prefix(s.cached, prompt), static_cast<int64_t>(prompt.size()) - 1);
    }
    // The longest shared prefix; among equals, the slot used longest ago (its cache is the one
    // least likely to be continued).
    if (r > best_reuse || (r == best_reuse && s.last_used < slots_[best]->last_used)) {
      best = i;
      best_reuse = r;
    }
  }
  reuse = best_reuse;
  return best;  // the caller checked that a slot is free
}

void EngineWorker::start(Slot& slot) {
  GenerationJob& job = *slot.job;
  if (slot.choice == 0) unpublished_.prompt_tokens += job.prompt.size();
  if (job.cancelled && job.cancelled->load()) return finish(slot, nullptr);
  const bool report_prompt = job.prompt_logprobs_from >= 0 && slot.choice == 0;
  if (report_prompt) slot.reuse = 0;  // every prompt position's logits are needed
  try {
    slot.sampler.emplace(job.sampling, static_cast<int32_t>(model_->config().n_vocab));
    // From here the cache holds exactly the reused prefix, even if the generator rejects the job.
    slot.ctx.truncate(slot.reuse);
    if (slot.routes) slot.routes->sequence_break();
    slot.cached.resize(static_cast<size_t>(slot.reuse));
    SequenceOptions so;
    so.limits.max_tokens = job.max_tokens;
    so.stop = job.stop;
    so.cached_prompt_tokens = slot.reuse;
    so.prefill_chunk = std::max<int64_t>(1, options_.context.max_batch);  // as InferenceContext clamps it
    if (job.grammar) {
      if (!trie_) trie_ = grammar::TokenTrie::from_tokenizer(model_->tokenizer());
      slot.constraint = std::make_unique<grammar::GrammarConstraint>(job.grammar, trie_);
      so.constraint = slot.constraint.get();
    }
    if (job.top_logprobs >= 0) so.on_sampled = logprobs_reporter(slot);
    if (report_prompt) {
      slot.prompt_logprobs.clear();
      if (job.prompt_logprobs_from == 0) {
        TokenLogprobs first;
        first.chosen = {model_->tokenizer().token_to_piece(job.prompt.front()), std::nanf("")};
        slot.prompt_logprobs.push_back(std::move(first));
      }
      so.on_prompt_logits = prompt_logprobs_reporter(slot);
    }
    slot.seq.emplace(slot.ctx, *slot.sampler, job.prompt, so);
    // A one-token prompt has no logits to wait for.
    if (report_prompt && job.prompt.size() == 1 && job.on_prompt_logprobs) {
      job.on_prompt_logprobs(std::move(slot.prompt_logprobs));
    }
  } catch (...) {
    return finish(slot, std::current_exception());
  }
  // The whole prompt fits (the generator checked prompt + max_tokens against the context).
  slot.cached.insert(slot.cached.end(), job.prompt.begin() + slot.reuse, job.prompt.end());
  unpublished_.reused_prompt_tokens += static_cast<uint64_t>(slot.reuse);
  slot.published = slot.seq->stats();
  slot.sink = [&slot](int32_t id, std::string_view text) {
    if (id >= 0) slot.cached.push_back(id);
    GenerationJob& j = *slot.job;
    if (!text.empty() && j.on_text) j.on_text(text);
    return !(j.cancelled && j.cancelled->load());
  };
}

TokenLogprobs EngineWorker::token_logprobs_of(int32_t token, std::span<const float> logits, int top) const {
  const Tokenizer& tok = model_->tokenizer();
  const SampledLogprobs lp = token_logprobs(logits, token, top);
  TokenLogprobs out;
  out.chosen = {tok.token_to_piece(lp.chosen.id), lp.chosen.logprob};
  out.top.reserve(lp.top.size());
  for (const TokenLogprob& t : lp.top) out.top.push_back({tok.token_to_piece(t.id), t.logprob});
  return out;
}

std::function<void(int32_t, std::span<const float>)> EngineWorker::logprobs_reporter(Slot& slot) const {
  return [this, &slot](int32_t token, std::span<const float> logits) {
    GenerationJob& job = *slot.job;
    if (job.on_logprobs) job.on_logprobs(token_logprobs_of(token, logits, job.top_logprobs));
  };
}

std::function<void(int64_t, std::span<const float>)> EngineWorker::prompt_logprobs_reporter(Slot& slot) const {
  return [this, &slot](int64_t position, std::span<const float> logits) {
    GenerationJob& job = *slot.job;
    const auto next = static_cast<size_t>(position + 1);
    if (static_cast<int64_t>(next) >= job.prompt_logprobs_from) {
      slot.prompt_logprobs.push_back(token_logprobs_of(job.prompt[next], logits, job.top_logprobs));
    }
    if (next + 1 == job.prompt.size() && job.on_prompt_logprobs) job.on_prompt_logprobs(std::move(slot.prompt_logprobs));
  };
}

void EngineWorker::step(Slot& slot) {
  GenerationJob& job = *slot.job;
  try {
    if (job.cancelled && job.cancelled->load()) {
      slot.seq->cancel(slot.sink);
    } else {
      slot.seq->step(slot.sink);
    }
  } catch (...) {
    return finish(slot, std::current_exception());
  }
  if (slot.seq->done()) {
    const bool more = (slot.choice + 1 < job.choices || !job.later_prompts.empty()) &&
                      slot.seq->stats().finish != FinishReason::Cancelled && !(job.cancelled && job.cancelled->load());
    return more ? next_choice(slot) : finish(slot, nullptr);
  }
  account(slot);
}

void EngineWorker::next_choice(Slot& slot) {
  GenerationJob& job = *slot.job;
  const GenerationStats stats = slot.seq->stats();
  account(slot);
  slot.cached.resize(std::min(slot.cached.size(), static_cast<size_t>(slot.ctx.n_past())));
  slot.seq.reset();
  slot.sampler.reset();
  slot.constraint.reset();
  slot.sink = nullptr;
  ++slot.choice;
  job.sampling.seed += 1;
  if (slot.choice == job.choices) {
    // The next prompt: its choices count (and seed) from the start again.
    job.prompt = std::move(job.later_prompts.front());
    job.later_prompts.erase(job.later_prompts.begin());
    slot.choice = 0;
    job.sampling.seed -= static_cast<uint64_t>(job.choices);
  }
  // The prompt is still in the cache (or the next prompt's shared prefix is), followed by the last
  // choice's tokens; the last prompt token is evaluated again for its logits (as pick_slot does
  // for any reuse). A new prompt reuses only where prefix reuse is on.
  slot.reuse = options_.reuse_prefix || slot.choice > 0
                   ? std::min(common_prefix(slot.cached, job.prompt), static_cast<int64_t>(job.prompt.size()) - 1)
                   : 0;
  if (job.on_choice_end) job.on_choice_end(stats);
}

void EngineWorker::account(Slot& slot) {
  const GenerationStats& now = slot.seq->stats();
  GenerationStats& before = slot.published;
  unpublished_.prefill_tokens += static_cast<uint64_t>(now.prefill_tokens - before.prefill_tokens);
  unpublished_.generated_tokens += static_cast<uint64_t>(now.generated_tokens - before.generated_tokens);
  unpublished_.prefill_seconds += now.prefill_seconds - before.prefill_seconds;
  unpublished_.decode_seconds += now.decode_seconds - before.decode_seconds;
  if (cache_) cache_->decoded(static_cast<uint64_t>(now.generated_tokens - before.generated_tokens));
  before = now;
}

void EngineWorker::finish(Slot& slot, std::exception_ptr error) {
  GenerationJob job = std::move(*slot.job);
  GenerationStats stats = slot.seq ? slot.seq->stats() : cancelled_stats(job);
  if (slot.seq) account(slot);
  if (cache_) cache_->job_finished(error != nullptr);  // may make a re-plan due (not after a failure)
  if (error) {
    ++unpublished_.jobs_failed;
  } else if (stats.finish == FinishReason::Cancelled) {
    ++unpublished_.jobs_cancelled;
  } else {
    ++unpublished_.jobs_completed;
  }
  if (error && slot.seq) {
    // A step failed part-way: the cache may hold half-written positions, so the next job starts
    // from scratch.
    slot.ctx.reset();
    slot.cached.clear();
  } else {
    // Keep exactly the tokens whose keys and values are in the cache (the last sampled token and
    // an unfinished prefill's rest never were evaluated).
    slot.cached.resize(std::min(slot.cached.size(), static_cast<size_t>(slot.ctx.n_past())));
  }
  slot.seq.reset();
  slot.sampler.reset();
  slot.constraint.reset();
  slot.sink = nullptr;
  slot.job.reset();
  slot.choice = 0;
  {
    std::lock_guard lock(mu_);
    --active_;
    publish_locked();
  }
  call_on_done(job, stats, error);
}

}  // namespace ember::server
