#include "server/http_metrics.h"

#include <cmath>
#include <cstdio>

namespace ember::server {

Endpoint endpoint_of(std::string_view path) {
  constexpr std::string_view models_prefix = "/v1/models/";
  if (path == "/health") return Endpoint::Health;
  if (path == "/metrics") return Endpoint::Metrics;
  if (path == "/v1/models") return Endpoint::Models;
  if (path.size() > models_prefix.size() && path.substr(0, models_prefix.size()) == models_prefix) {
    constexpr std::string_view unload = "/unload";
    if (path.size() > models_prefix.size() + unload.size() && path.ends_with(unload)) return Endpoint::ModelUnload;
    return Endpoint::Model;
  }
  if (path == "/v1/completions") return Endpoint::Completions;
  if (path == "/v1/chat/completions") return Endpoint::ChatCompletions;
  if (path == "/tokenize") return Endpoint::Tokenize;
  if (path == "/detokenize") return Endpoint::Detokenize;
  return Endpoint::Other;
}

const char* endpoint_label(Endpoint e) {
  switch (e) {
    case Endpoint::Health: return "/health";
    case Endpoint::Metrics: return "/metrics";
    case Endpoint::Models: return "/v1/models";
    case Endpoint::Model: return "/v1/models/{id}";
    case Endpoint::ModelUnload: return "/v1/models/{id}/unload";
    case Endpoint::Completions: return "/v1/completions";
    case Endpoint::ChatCompletions: return "/v1/chat/completions";
    case Endpoint::Tokenize: return "/tokenize";
    case Endpoint::Detokenize: return "/detokenize";
    case Endpoint::Other: break;
  }
  return "other";
}

void HttpMetrics::record(Endpoint endpoint, int status) {
  std::lock_guard lock(mu_);
  ++requests_[{static_cast<int>(endpoint), status}];
}

std::map<std::pair<int, int>, uint64_t> HttpMetrics::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

namespace {

// Prometheus floats: plain decimal, no locale; rates are 0 until there is time to divide by.
std::string number(double v) {
  if (!std::isfinite(v)) return "0";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const char* name, const std::string& value) {
  out += name;
  out += ' ';
  out += value;
  out += '\n';
}

void metric(std::string& out, const char* name, const char* type, const char* help, const std::string& value) {
  family(out, name, type, help);
  sample(out, name, value);
}

std::string u(uint64_t v) { return std::to_string(v); }

double seconds(uint64_t ns) { return static_cast<double>(ns) * 1e-9; }

// The sparse FFN's counters (only when the engine collects them: a sparse mode or diagnostics),
// all slots and layers together, decode steps only. The mode is a label of a constant info
// metric, so a dashboard can tell which mode the numbers belong to.
void render_sparse(std::string& out, const EngineMetrics& e) {
  const SparseLayerStats& s = e.sparse_totals;
  family(out, "ember_sparse_info", "gauge", "Sparse FFN mode of decode steps (value always 1).");
  out += "ember_sparse_info{mode=\"";
  out += e.sparse_mode;  // one of the fixed names from sparse_mode_name(): nothing to escape
  out += "\"} 1\n";
  metric(out, "ember_sparse_decode_tokens_total", "counter", "Decode steps run with the sparse FFN counters on.",
         u(e.sparse_decode_tokens));
  metric(out, "ember_sparse_ffn_neurons_total", "counter",
         "FFN neurons a dense FFN would have computed in those steps (tokens x layers x n_ff).", u(s.neurons));
  metric(out, "ember_sparse_ffn_active_neurons_total", "counter",
         "FFN neurons the sparse FFN computed (predicted or selected active).", u(s.active));
  metric(out, "ember_sparse_ffn_active_fraction", "gauge",
         "Share of FFN neurons computed since start (active / neurons; 1 - sparsity).", number(s.active_fraction()));
  metric(out, "ember_sparse_attention_seconds_total", "counter",
         "Seconds of decode steps spent in attention (norm, q/k/v, attention, output projection).",
         number(seconds(s.attention_ns)));
  metric(out, "ember_sparse_predictor_seconds_total", "counter",
         "Seconds of decode steps spent choosing the active neurons (predictor or threshold selection).",
         number(seconds(s.predictor_ns)));
  metric(out, "ember_sparse_ffn_seconds_total", "counter", "Seconds of decode steps spent in the FFN proper.",
         number(seconds(s.ffn_ns)));
  if (!e.sparse_diagnostics) return;
  metric(out, "ember_sparse_diagnostics_seconds_total", "counter",
         "Seconds spent on the dense gate/up computed only to measure recall and precision.",
         number(seconds(s.diagnostics_ns)));
  metric(out, "ember_sparse_ffn_true_active_fraction", "gauge",
         "Share of FFN neurons truly active (non-zero activation) since start.", number(s.true_active_fraction()));
  metric(out, "ember_sparse_recall", "gauge",
         "Share of the truly active neurons that were computed since start (1 when none was active).",
         number(s.recall()));
  metric(out, "ember_sparse_precision", "gauge",
         "Share of the computed neurons that were truly active since start (1 when none was computed).",
         number(s.precision()));
}

// A mixture of experts' routing (only for such a model): how often each expert of each layer was
// chosen, and how often consecutive tokens of a sequence share experts (what an expert cache
// lives on). Prompt and generated tokens alike, every slot.
void render_moe(std::string& out, const EngineMetrics& e) {
  family(out, "ember_moe_expert_routed_total", "counter",
         "Tokens routed to each expert, per layer (each token goes to expert_used_count experts).");
  const auto n_expert = static_cast<size_t>(e.moe_n_expert);
  for (size_t i = 0; i < e.moe_expert_routed.size(); ++i) {
    out += "ember_moe_expert_routed_total{layer=\"" + std::to_string(i / n_expert) + "\",expert=\"" +
           std::to_string(i % n_expert) + "\"} " + u(e.moe_expert_routed[i]) + "\n";
  }
  metric(out, "ember_moe_consecutive_pairs_total", "counter",
         "Pairs of consecutive tokens of a sequence, counted per layer.", u(e.moe_pairs));
  metric(out, "ember_moe_top1_repeats_total", "counter",
         "Of those pairs, the ones whose first-choice expert is the same.", u(e.moe_top1_repeats));
  metric(out, "ember_moe_expert_overlaps_total", "counter",
         "Of those pairs, the ones whose chosen experts share at least one.", u(e.moe_overlaps));
}

// The neuron cache under a memory budget (only with one: without a budget there is no cache and
// these families are absent). Everything is cumulative since the model was loaded, re-plans
// included; reads and bytes count both cold-bundle fetches and the chunks streamed for dense
// steps (prompt prefill), the latency histogram only the fetches.
void render_offload(std::string& out, const EngineMetrics& e) {
  const OffloadStats& s = e.offload;
  metric(out, "ember_memory_budget_bytes", "gauge",
         "The memory budget in force: cap on resident model bytes (memory.budget, lowered under memory pressure).",
         u(e.memory_budget_bytes));
  metric(out, "ember_memory_configured_budget_bytes", "gauge",
         "The configured memory budget (memory.budget), which the budget grows back to after pressure.",
         u(e.memory_configured_budget_bytes));
  family(out, "ember_memory_budget_changes_total", "counter",
         "Budget changes for memory pressure: direction=\"shrink\" under pressure, \"regrow\" after it.");
  out += "ember_memory_budget_changes_total{direction=\"shrink\"} " + u(e.memory_budget_shrinks) + "\n";
  out += "ember_memory_budget_changes_total{direction=\"regrow\"} " + u(e.memory_budget_regrowths) + "\n";
  metric(out, "ember_memory_budget_change_failures_total", "counter",
         "Budget changes whose hot-neuron reads failed (logged; the cache runs without hot neurons).",
         u(e.memory_resize_failures));
  metric(out, "ember_memory_resident_bytes", "gauge",
         "Planned resident model bytes (within the budget): weights kept in memory, hot neurons, cold slots.",
         u(e.memory_resident_bytes));
  metric(out, "ember_memory_io_buffer_bytes", "gauge",
         "Bytes of read buffers of the neuron cache (staging, streamed chunks), outside the budget like the KV cache.",
         u(e.memory_io_buffer_bytes));
  family(out, "ember_neuron_cache_hits_total", "counter",
         "FFN bundles found in memory: kind=\"hot\" in a pinned hot prefix, kind=\"cold\" in a cold slot.");
  out += "ember_neuron_cache_hits_total{kind=\"hot\"} " + u(s.cache.hot_hits) + "\n";
  out += "ember_neuron_cache_hits_total{kind=\"cold\"} " + u(s.cache.cold_hits) + "\n";
  metric(out, "ember_neuron_cache_misses_total", "counter", "FFN bundles that had to be read from the pack.",
         u(s.cache.misses));
  metric(out, "ember_neuron_cache_hit_rate", "gauge", "hits / (hits + misses) since load (0 before any lookup).",
         number(s.cache.hit_rate()));
  metric(out, "ember_neuron_cache_evictions_total", "counter", "Cold slots whose bundle was replaced by another.",
         u(s.cache.evictions));
  metric(out, "ember_neuron_cache_reads_total", "counter",
         "Reads from the pack (coalesced bundle fetches and streamed chunks of dense steps).",
         u(s.fetch.reads + s.stream_reads));
  metric(out, "ember_neuron_cache_read_bytes_total", "counter", "Bytes read from the pack by those reads.",
         u(s.bytes_read()));
  metric(out, "ember_neuron_cache_io_wait_seconds_total", "counter",
         "Seconds the engine was blocked waiting for reads.", number(seconds(s.io_wait_ns())));
  metric(out, "ember_neuron_cache_prefetched_bundles_total", "counter",
         "Bundles read ahead of their layer (memory.prefetch) from the residual entering it.",
         u(s.fetch.prefetched_bundles));
  metric(out, "ember_neuron_cache_prefetched_used_total", "counter",
         "Prefetched bundles that their layer's step then used (the rest were mispredicted).",
         u(s.fetch.prefetched_used));
  // Bucket b of latency_us_log2 counts [2^b, 2^(b+1)) microseconds (bucket 0 also below 1 us, the
  // last one everything above): cumulative `le` bounds of 2^(b+1) us, the last bucket only in +Inf.
  // The histogram keeps no exact sum: _sum takes each read at its bucket's midpoint (1.5 * 2^b us).
  family(out, "ember_neuron_cache_read_latency_seconds", "histogram",
         "Latency of cold-bundle reads, submit to completion (_sum estimated from the buckets).");
  const auto& buckets = s.fetch.latency_us_log2;
  const int n = static_cast<int>(buckets.size());
  uint64_t cumulative = 0;
  double sum_us = 0;
  for (int b = 0; b < n; ++b) {
    cumulative += buckets[static_cast<size_t>(b)];
    sum_us += static_cast<double>(buckets[static_cast<size_t>(b)]) * 1.5 * std::ldexp(1.0, b);
    if (b == n - 1) break;
    char le[32];  // 2^(b+1) us in seconds: 9 digits are exact for every bucket ("2e-06" ... "8.388608")
    std::snprintf(le, sizeof le, "%.9g", std::ldexp(1.0, b + 1) * 1e-6);
    out += "ember_neuron_cache_read_latency_seconds_bucket{le=\"";
    out += le;
    out += "\"} " + u(cumulative) + "\n";
  }
  out += "ember_neuron_cache_read_latency_seconds_bucket{le=\"+Inf\"} " + u(cumulative) + "\n";
  out += "ember_neuron_cache_read_latency_seconds_sum " + number(sum_us * 1e-6) + "\n";
  out += "ember_neuron_cache_read_latency_seconds_count " + u(cumulative) + "\n";
  metric(out, "ember_neuron_cache_replans_total", "counter",
         "Re-plans of the hot set that changed it (the cache was rebuilt and its hot neurons read).",
         u(e.replans));
  metric(out, "ember_neuron_cache_replan_runs_total", "counter",
         "Re-plans run (memory.replan_tokens decoded tokens each, and one at start after loading saved counts).",
         u(e.replan_runs));
  metric(out, "ember_neuron_cache_replan_failures_total", "counter", "Re-plans that failed (logged).",
         u(e.replan_failures));
}

}  // namespace

std::string render_prometheus(const MetricsSnapshot& m) {
  std::string out;
  const EngineMetrics& e = m.engine;
  family(out, "ember_http_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
  for (const auto& [key, count] : m.requests) {
    // Labels come from the fixed endpoint set and integer codes: nothing to escape.
    out += "ember_http_requests_total{endpoint=\"";
    out += endpoint_label(static_cast<Endpoint>(key.first));
    out += "\",status=\"";
    out += std::to_string(key.second);
    out += "\"} ";
    out += u(count);
    out += '\n';
  }
  metric(out, "ember_http_active_requests", "gauge", "HTTP requests being answered now (streams included).",
         std::to_string(m.http_active_requests));
  metric(out, "ember_model_loaded", "gauge", "1 while a model is loaded (the engine metrics are its), 0 while none is.",
         m.model_loaded ? "1" : "0");
  if (m.models) {
    const RegistryCounters& r = *m.models;
    metric(out, "ember_models_loaded", "gauge", "Models loaded now.", u(r.loaded));
    metric(out, "ember_models_memory_bytes", "gauge",
           "What the loaded models count against the memory limit (weights or budget, plus KV caches).",
           u(r.account_bytes));
    metric(out, "ember_models_memory_limit_bytes", "gauge", "The daemon's memory limit for models; 0: none.",
           u(r.memory_limit));
    metric(out, "ember_model_loads_total", "counter", "Models loaded (the startup model included).", u(r.loads));
    metric(out, "ember_model_load_failures_total", "counter", "Model loads that failed or were refused for room.",
           u(r.load_failures));
    family(out, "ember_model_unloads_total", "counter",
           "Models unloaded, by reason: idle (keep-alive over), evicted (room for another), requested, pressure.");
    const std::pair<const char*, uint64_t> reasons[] = {{"idle", r.unloads_idle},
                                                       {"evicted", r.unloads_evicted},
                                                       {"requested", r.unloads_requested},
                                                       {"pressure", r.unloads_pressure}};
    for (const auto& [reason, n] : reasons) {
      out += std::string("ember_model_unloads_total{reason=\"") + reason + "\"} " + u(n) + "\n";
    }
  }
  metric(out, "ember_prompt_tokens_total", "counter", "Prompt tokens of accepted generation jobs.",
         u(e.prompt_tokens));
  metric(out, "ember_prefill_tokens_total", "counter",
         "Prompt tokens actually evaluated (prefix reuse skips some).", u(e.prefill_tokens));
  metric(out, "ember_reused_prompt_tokens_total", "counter", "Prompt tokens served from a slot's KV cache.",
         u(e.reused_prompt_tokens));
  metric(out, "ember_generated_tokens_total", "counter", "Tokens generated.", u(e.generated_tokens));
  metric(out, "ember_prefill_seconds_total", "counter", "Seconds spent evaluating prompts.",
         number(e.prefill_seconds));
  metric(out, "ember_decode_seconds_total", "counter", "Seconds spent generating tokens (sampling included).",
         number(e.decode_seconds));
  metric(out, "ember_prefill_tokens_per_second", "gauge",
         "Prompt evaluation speed since start (evaluated prompt tokens / prefill seconds).",
         number(e.prefill_seconds > 0 ? static_cast<double>(e.prefill_tokens) / e.prefill_seconds : 0.0));
  metric(out, "ember_decode_tokens_per_second", "gauge",
         "Generation speed since start (generated tokens / decode seconds).",
         number(e.decode_seconds > 0 ? static_cast<double>(e.generated_tokens) / e.decode_seconds : 0.0));
  metric(out, "ember_queue_depth", "gauge", "Generation jobs waiting for a slot.", u(e.queued_jobs));
  metric(out, "ember_active_requests", "gauge", "Generation jobs in a slot (prefilling or decoding).",
         u(e.active_jobs));
  metric(out, "ember_jobs_completed_total", "counter", "Generation jobs that finished normally.",
         u(e.jobs_completed));
  metric(out, "ember_jobs_cancelled_total", "counter",
         "Generation jobs cancelled (client gone, timeout, slow reader, shutdown).", u(e.jobs_cancelled));
  metric(out, "ember_jobs_failed_total", "counter", "Generation jobs that failed with an engine error.",
         u(e.jobs_failed));
  metric(out, "ember_slots", "gauge", "Sequences the engine generates together.", std::to_string(e.slots));
  metric(out, "ember_kv_cache_bytes", "gauge", "Bytes of KV cache, all slots.", u(e.kv_cache_bytes));
  metric(out, "ember_model_bytes", "gauge", "Bytes of model weights resident (mapped or read).", u(e.model_bytes));
  if (e.moe_n_expert > 0) render_moe(out, e);
  if (e.sparse_counted) render_sparse(out, e);
  if (e.offloaded) render_offload(out, e);
  return out;
}

}  // namespace ember::server
