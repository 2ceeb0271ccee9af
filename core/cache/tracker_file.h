#pragma once
// Saving and loading an ActivationTracker, so a restarted daemon starts with the traffic
// statistics it had (the counts are saved atomically on shutdown and reloaded at
// start). The file is tied to one model by a TrackerIdentity; a file written for another model
// (or another pack of the same model: the bundle order differs) is refused, and the caller falls
// back to seeding from the pack's offline frequencies.
//
// Format (version 1, little-endian, no padding):
//   offset  size            field
//   0       8               magic "EMBRTRK\0"
//   8       4               version u32 = 1
//   12      4               n_layer u32 (1 .. 65536)
//   16      8               fingerprint u64 (TrackerIdentity::fingerprint)
//   24      8               half-life in tokens f64 (>= 1, or +inf: no decay)
//   32      4 * n_layer     n_ff u32 per layer (1 .. INT32_MAX)
//   then per layer:         token weight f64, then n_ff decayed counts f64 (pack order)
//   last    8               FNV-1a 64 of every byte before it
// Counts and token weights are the true decayed values (ActivationTracker::snapshot), so a file
// does not depend on the tracker's internal scaling.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/cache/activation_tracker.h"
#include "core/util/fnv1a.h"

namespace ember::cache {

// What ties a tracker file to a model: its shape and a fingerprint the caller computes, e.g.
// fnv1a64 over the pack's size and its neuron_perm tensors (the bundle order the counts refer to).
struct TrackerIdentity {
  std::vector<uint32_t> n_ff;  // per layer
  uint64_t fingerprint = 0;
};

// Writes `path.tmp.<pid>`, fsyncs it, renames it over `path` and fsyncs the directory, so `path`
// is always either the old file or the complete new one, even across a crash or power loss.
// Throws std::invalid_argument when the tracker's shape differs from the identity, and
// std::runtime_error naming the file and the failed step (the temporary file is removed and an
// existing `path` is left as it was).
void save_tracker_atomically(const std::string& path, const ActivationTracker& tracker, const TrackerIdentity& identity);

// Reads a file written by save_tracker_atomically for this identity. Throws std::runtime_error
// naming the file and the problem: cannot open, not a regular file, truncated, bad magic,
// unsupported version, n_layer / n_ff out of range, written for another model (n_layer, a layer's
// n_ff or the fingerprint differ), size not the one the header describes, checksum mismatch,
// half-life, a token weight or a count NaN, negative or out of range.
ActivationTracker load_tracker(const std::string& path, const TrackerIdentity& identity);

}  // namespace ember::cache
