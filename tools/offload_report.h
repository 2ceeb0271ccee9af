#pragma once
// What `ember run --stats` / `--stats-json` and `ember bench --stats-json` report about memory and
// the neuron cache: decode speed, cache hit rate, bytes read per token, read throughput, I/O wait,
// peak RSS against the budget. Also works without a budget (the cache fields are then null).
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "core/model/inference_context.h"
#include "core/model/model.h"

namespace ember::cli {


struct RunFigures {
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;   // time to first token: the whole prompt evaluated
  int64_t decode_tokens = 0;
  double decode_seconds = 0;
  OffloadStats prefill_io;      // the neuron cache during prefill (zeros without a budget)
  OffloadStats decode_io;       // ... during decoding
};

// Peak resident set of this process (VmHWM), 0 when /proc is not readable.
uint64_t peak_rss_bytes();

// decode_tokens_per_s, prefill_tokens_per_s, ttft_ms, cache_hit_rate, bytes_read_per_token,
// io_read_mib_per_s, io_wait_ms_per_token, read_block_bytes_mean, peak_rss_bytes, budget_bytes,
// resident_bytes, kv_cache_bytes, scratch_bytes, io_backend, queue_depth, ... (README, "Memory budget").
nlohmann::json stats_json(const Model& model, const InferenceContext& ctx, const RunFigures& f);
// A few lines for a person, from stats_json().
void print_stats(const nlohmann::json& stats, std::FILE* out);
// Writes the JSON (pretty) to path; throws std::runtime_error naming the path.
void write_stats_json(const std::string& path, const nlohmann::json& stats);

}  // namespace ember::cli
