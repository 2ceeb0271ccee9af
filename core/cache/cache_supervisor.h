#pragma once
// Looks after a model's neuron cache while a daemon serves (core/cache/README.md, "Online
// adaptation"): loads the saved activation counts at start, re-plans the hot set between jobs once
// enough tokens were decoded, saves the counts after each re-plan and at stop, and gathers the
// counters the daemon reports. The daemon owns one per OffloadedFfn and calls it from its engine
// thread only, between steps; nothing else re-plans or saves.
#include <cstdint>
#include <functional>
#include <string>

#include "core/cache/offload_stats.h"
#include "core/cache/offloaded_ffn.h"

namespace ember::cache {

struct CacheSupervisorOptions {
  // The live counts are loaded from here at start (when the file exists) and saved here after
  // each re-plan and by save(); "": neither.
  std::string activation_state;
  // A re-plan is due when a job finishes and at least this many tokens were decoded since the
  // last one; 0: never.
  uint64_t replan_tokens = 8192;
  // Lines for the operator (the plan at start, the state file, re-plan failures); never empty.
  std::function<void(const std::string& line)> log;
};

// What the daemon reports of the cache (the ember_neuron_cache_* metrics).
struct CacheCounters {
  uint64_t budget_bytes = 0;
  uint64_t resident_bytes = 0;   // the plan's total: resident weights + hot neurons + cold slots
  uint64_t io_buffer_bytes = 0;  // read buffers, outside the budget
  OffloadStats offload;          // cumulative since load
  uint64_t replan_runs = 0;      // re-plans run
  uint64_t replans = 0;          // ... of which changed the hot set
  uint64_t replan_failures = 0;
  // Memory-pressure elasticity (resize()): budget changes that lowered / raised it, and failures.
  uint64_t budget_shrinks = 0;
  uint64_t budget_regrowths = 0;
  uint64_t resize_failures = 0;
};

class CacheSupervisor {
 public:
  // Loads the saved counts (a damaged or foreign file is only a warning: the pack's profile is a
  // fine start) and re-plans from them, then logs the plan. Throws when that re-plan fails: with
  // no usable cache that is a startup error, like a failed load. `ffn` outlives this.
  CacheSupervisor(OffloadedFfn& ffn, CacheSupervisorOptions options);

  // Tokens decoded by a step of any job.
  void decoded(uint64_t tokens) { decoded_since_replan_ += tokens; }
  // A job ended. Not after a failed one: its error may be a failing disk, and a re-plan that
  // cannot read its hot neurons leaves a cache without them; the next good job makes it due.
  void job_finished(bool failed);
  // Between jobs: the due re-plan, then a save of the counts. Never throws (failures are logged;
  // a failed re-plan leaves a working cache without hot neurons and the next one tries again).
  void replan_if_due();
  bool replan_due() const { return replan_due_; }
  // Between steps: plans the cache for a budget of `bytes` (0: the configured one; see
  // OffloadedFfn::set_budget) and logs the change with `reason`. Never throws (a failed read leaves
  // a working cache without hot neurons, logged). Returns the budget in force.
  uint64_t resize(uint64_t bytes, const std::string& reason);
  // Saves the live counts (never throws: failures are logged). True when saved.
  bool save();
  const std::string& state_path() const { return options_.activation_state; }

  CacheCounters counters() const;

 private:
  void load_saved_counts();
  void log_plan() const;

  OffloadedFfn& ffn_;
  CacheSupervisorOptions options_;
  uint64_t decoded_since_replan_ = 0;
  bool replan_due_ = false;
  uint64_t replan_runs_ = 0, replan_failures_ = 0;
  uint64_t budget_shrinks_ = 0, budget_regrowths_ = 0, resize_failures_ = 0;
};

}  // namespace ember::cache
