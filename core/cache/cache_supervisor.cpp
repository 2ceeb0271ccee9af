#include "core/cache/cache_supervisor.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <utility>

namespace ember::cache {
namespace {

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

CacheSupervisor::CacheSupervisor(OffloadedFfn& ffn, CacheSupervisorOptions options)
    : ffn_(ffn), options_(std::move(options)) {
  load_saved_counts();
  log_plan();
  if (options_.replan_tokens == 0) options_.log("hot set re-planning off (memory.replan_tokens 0)");
}

void CacheSupervisor::load_saved_counts() {
  // The live counts of the last run, so a restarted daemon plans from real traffic at once.
  const std::string& path = options_.activation_state;
  if (path.empty()) return;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    options_.log("no saved activation counts at " + path + " yet: starting from the pack's profile");
    return;
  }
  try {
    ffn_.load_activations(path);
    options_.log("activation counts loaded from " + path);
  } catch (const std::exception& e) {
    options_.log("warning: ignoring the saved activation counts " + path + " (" + e.what() +
                 "); starting from the pack's profile");
    return;
  }
  ++replan_runs_;
  if (ffn_.replan()) options_.log("hot set re-planned from the saved activation counts");
}

void CacheSupervisor::log_plan() const {
  const BudgetPlan& plan = ffn_.plan();
  uint32_t hot_neurons = 0;
  for (uint32_t h : plan.hot) hot_neurons += h;
  // The plan's parts add up to its total; the I/O buffers are scratch outside the budget (like the
  // KV cache), listed so the memory the daemon really takes can be worked out from the log.
  options_.log("memory budget " + mib(ffn_.budget_bytes()) + ": resident weights " + mib(plan.resident_bytes) +
               " + hot neurons " + mib(plan.hot_total_bytes) + " (" + std::to_string(hot_neurons) +
               " bundles) + cold slots " + mib(plan.cold_total_bytes) + " (" + std::to_string(plan.cold_slots) +
               ") = " + mib(plan.total_bytes) + " (minimum " + mib(plan.minimum_bytes) + "); I/O buffers " +
               mib(ffn_.io_buffer_bytes()) + " outside the budget; reads: " + ffn_.backend_name() +
               ", queue depth " + std::to_string(ffn_.queue_depth()) + (ffn_.direct_io() ? ", O_DIRECT" : ", buffered"));
  for (const std::string& w : ffn_.warnings()) options_.log("warning: " + w);
}

void CacheSupervisor::job_finished(bool failed) {
  if (!failed && options_.replan_tokens > 0 && decoded_since_replan_ >= options_.replan_tokens) replan_due_ = true;
}

void CacheSupervisor::replan_if_due() {
  if (!replan_due_) return;
  replan_due_ = false;
  decoded_since_replan_ = 0;
  ++replan_runs_;
  try {
    if (ffn_.replan()) {
      options_.log("hot set re-planned: hot neurons " + mib(ffn_.plan().hot_total_bytes) + ", cold slots " +
                   std::to_string(ffn_.plan().cold_slots));
    }
  } catch (const std::exception& e) {
    ++replan_failures_;
    // OffloadedFfn::replan() leaves a working cache without hot neurons behind: requests still run
    // (slower, every neuron read on demand) and the next re-plan tries again.
    options_.log(std::string("error: re-planning the neuron cache failed: ") + e.what() +
                 "; serving on without hot neurons until the next re-plan");
  }
  save();  // a crash later still leaves recent counts behind
}

uint64_t CacheSupervisor::resize(uint64_t bytes, const std::string& reason) {
  const uint64_t before = ffn_.budget_bytes();
  try {
    const uint64_t now = ffn_.set_budget(bytes);
    if (now == before) return now;
    (now < before ? budget_shrinks_ : budget_regrowths_) += 1;
    options_.log("neuron cache budget " + mib(before) + " -> " + mib(now) + " (" + reason + "): hot neurons " +
                 mib(ffn_.plan().hot_total_bytes) + ", cold slots " + std::to_string(ffn_.plan().cold_slots));
  } catch (const std::exception& e) {
    ++resize_failures_;
    options_.log("error: resizing the neuron cache to " + mib(bytes) + " (" + reason + ") failed: " + e.what() +
                 "; serving on without hot neurons until the next re-plan");
  }
  return ffn_.budget_bytes();
}

bool CacheSupervisor::save() {
  const std::string& path = options_.activation_state;
  if (path.empty()) return false;
  try {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);  // e.g. a first ~/.local/state/ember
    ffn_.save_activations(path);
  } catch (const std::exception& e) {
    options_.log("warning: cannot save the activation counts to " + path + ": " + e.what());
    return false;
  }
  return true;
}

CacheCounters CacheSupervisor::counters() const {
  CacheCounters c;
  c.budget_bytes = ffn_.budget_bytes();
  c.resident_bytes = ffn_.plan().total_bytes;
  c.io_buffer_bytes = ffn_.io_buffer_bytes();
  c.offload = ffn_.stats();
  c.replan_runs = replan_runs_;
  c.replans = ffn_.replans();
  c.replan_failures = replan_failures_;
  c.budget_shrinks = budget_shrinks_;
  c.budget_regrowths = budget_regrowths_;
  c.resize_failures = resize_failures_;
  return c;
}

}  // namespace ember::cache
