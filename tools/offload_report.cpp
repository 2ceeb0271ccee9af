#include "tools/offload_report.h"

#include "tools/read_text_file.h"

#include <fstream>
#include <stdexcept>

namespace ember::cli {
namespace {

double per(double a, double b) { return b > 0 ? a / b : 0.0; }
constexpr double kMiB = 1024.0 * 1024.0;

nlohmann::json nullable(bool present, double v) { return present ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmHWM:  123 kB"
  }
  return 0;
}

nlohmann::json stats_json(const Model& model, const InferenceContext& ctx, const RunFigures& f) {
  const OffloadedFfn* off = model.offloaded_ffn();
  const bool cached = off != nullptr;
  const OffloadStats& d = f.decode_io;
  const double tokens = static_cast<double>(f.decode_tokens);
  const double lookups = static_cast<double>(d.cache.lookups());
  nlohmann::json j = {
      {"model", model.file().path()},
      {"prompt_tokens", f.prompt_tokens},
      {"decode_tokens", f.decode_tokens},
      {"decode_tokens_per_s", per(tokens, f.decode_seconds)},
      {"prefill_tokens_per_s", per(static_cast<double>(f.prompt_tokens), f.prefill_seconds)},
      {"ttft_ms", f.prefill_seconds * 1000.0},
      {"peak_rss_bytes", peak_rss_bytes()},
      {"kv_cache_bytes", ctx.kv_cache_bytes()},
      {"scratch_bytes", ctx.scratch_bytes()},
      {"model_file_bytes", model.file().file_size()},
      {"weights_resident_bytes", model.weights().memory_bytes()},
      {"memory_budget", cached},
  };
  j["cache_hit_rate"] = nullable(cached && lookups > 0, per(static_cast<double>(d.cache.hot_hits + d.cache.cold_hits), lookups));
  j["bytes_read_per_token"] = nullable(cached, per(static_cast<double>(d.bytes_read()), tokens));
  // Throughput the device delivered while reads were outstanding (see FetcherStats::busy_ns).
  j["io_read_mib_per_s"] = nullable(cached && d.fetch.busy_ns > 0,
                                    per(static_cast<double>(d.fetch.bytes_read) / kMiB, static_cast<double>(d.fetch.busy_ns) * 1e-9));
  j["io_wait_ms_per_token"] = nullable(cached, per(static_cast<double>(d.io_wait_ns()) * 1e-6, tokens));
  j["read_block_bytes_mean"] = nullable(cached && d.fetch.reads > 0, per(static_cast<double>(d.fetch.bytes_read), static_cast<double>(d.fetch.reads)));
  if (!cached) return j;

  const cache::BudgetPlan& plan = off->plan();
  j["budget_bytes"] = off->budget_bytes();
  j["resident_bytes"] = plan.total_bytes;  // weights + hot prefixes + cold slots: within the budget
  j["io_buffer_bytes"] = off->io_buffer_bytes();
  j["hot_bytes"] = plan.hot_total_bytes;
  j["cold_slots"] = plan.cold_slots;
  j["cold_bytes"] = plan.cold_total_bytes;
  j["minimum_budget_bytes"] = plan.minimum_bytes;
  j["hot_activation_share"] = plan.hot_activation_share;
  j["io_backend"] = off->backend_name();
  j["queue_depth"] = off->queue_depth();
  j["direct_io"] = off->direct_io();
  j["read_alignment"] = off->read_alignment();
  j["warnings"] = off->warnings();
  j["decode"] = {
      {"hot_hits", d.cache.hot_hits},        {"cold_hits", d.cache.cold_hits},
      {"misses", d.cache.misses},            {"evictions", d.cache.evictions},
      {"reads", d.fetch.reads},              {"bytes_read", d.fetch.bytes_read},
      {"bytes_wanted", d.fetch.bytes_wanted}, {"bytes_wasted", d.fetch.bytes_wasted},
      {"io_wait_ms", static_cast<double>(d.io_wait_ns()) * 1e-6},
      {"read_busy_ms", static_cast<double>(d.fetch.busy_ns) * 1e-6},
      {"dense_layer_steps", d.dense_steps},  {"stream_bytes_read", d.stream_bytes_read},
      {"read_latency_us_log2", d.fetch.latency_us_log2},
      {"prefetched_bundles", d.fetch.prefetched_bundles},
      {"prefetched_used", d.fetch.prefetched_used},
      {"prefetch_wait_ms", static_cast<double>(d.fetch.prefetch_wait_ns) * 1e-6},
  };
  const OffloadStats& p = f.prefill_io;
  j["prefill"] = {
      {"bytes_read", p.bytes_read()},
      {"stream_reads", p.stream_reads},
      {"io_wait_ms", static_cast<double>(p.io_wait_ns()) * 1e-6},
      {"stream_mib_per_s", per(static_cast<double>(p.stream_bytes_read) / kMiB, f.prefill_seconds)},
  };
  j["hot_load_bytes"] = d.hot_load_bytes;
  return j;
}

void print_stats(const nlohmann::json& j, std::FILE* out) {
  auto num = [&](const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; };
  std::fprintf(out, "ember stats: decode %.2f tok/s, prefill %.2f tok/s (TTFT %.0f ms), peak RSS %.1f MiB (KV cache %.1f MiB, scratch %.1f MiB)\n",
               num("decode_tokens_per_s"), num("prefill_tokens_per_s"), num("ttft_ms"), num("peak_rss_bytes") / kMiB,
               num("kv_cache_bytes") / kMiB, num("scratch_bytes") / kMiB);
  if (!j.value("memory_budget", false)) {
    std::fprintf(out, "ember stats: no memory budget (all weights mapped: %.1f MiB)\n", num("weights_resident_bytes") / kMiB);
    return;
  }
  std::fprintf(out, "ember stats: budget %.1f MiB >= weights %.1f + hot neurons %.1f + cold slots %.1f (%lld); minimum %.1f MiB; I/O buffers %.1f MiB (outside)\n",
               num("budget_bytes") / kMiB, num("weights_resident_bytes") / kMiB, num("hot_bytes") / kMiB,
               num("cold_bytes") / kMiB, (long long)num("cold_slots"), num("minimum_budget_bytes") / kMiB,
               num("io_buffer_bytes") / kMiB);
  const std::string mode = j.value("direct_io", false)
                               ? " O_DIRECT, reads aligned to " + std::to_string(j.value("read_alignment", 0)) + " bytes"
                               : " buffered";
  std::fprintf(out, "ember stats: cache hit rate %.3f, %.1f KiB read per token (mean read %.1f KiB, %.0f MiB/s while reading), I/O wait %.2f ms per token, %s%s\n",
               num("cache_hit_rate"), num("bytes_read_per_token") / 1024.0, num("read_block_bytes_mean") / 1024.0,
               num("io_read_mib_per_s"), num("io_wait_ms_per_token"), j.value("io_backend", std::string("?")).c_str(),
               mode.c_str());
  if (j.contains("decode") && j["decode"].value("prefetched_bundles", uint64_t{0}) > 0) {
    const auto& d = j["decode"];
    const double fetched = static_cast<double>(d.value("prefetched_bundles", uint64_t{0}));
    std::fprintf(out, "ember stats: prefetch: %.0f bundles read ahead of their layer, %.1f %% of them used; waited %.2f ms per token for them (included above)\n",
                 fetched, 100.0 * static_cast<double>(d.value("prefetched_used", uint64_t{0})) / fetched,
                 per(d.value("prefetch_wait_ms", 0.0), num("decode_tokens")));
  }
}

void write_stats_json(const std::string& path, const nlohmann::json& stats) {
  write_text_file(path, stats.dump(2) + "\n", "--stats-json file");
}

}  // namespace ember::cli
