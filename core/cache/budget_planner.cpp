#include "core/cache/budget_planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <queue>

#include "core/util/align.h"

namespace ember::cache {
namespace {

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

[[noreturn]] void bad_layer(size_t layer, const std::string& problem) {
  throw std::invalid_argument("memory budget planner: layer " + std::to_string(layer) + ": " + problem);
}

uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw std::invalid_argument(std::string("memory budget planner: ") + what + " overflows");
  return r;
}

uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw std::invalid_argument(std::string("memory budget planner: ") + what + " overflows");
  return r;
}

uint64_t round_up(uint64_t v, uint64_t a, const char* what) {
  uint64_t r = 0;
  if (!checked_align_up(v, a, &r)) throw std::invalid_argument(std::string("memory budget planner: ") + what + " overflows");
  return r;
}

// Bytes of a hot region of `count` bundles (0 for none: no padding for an empty prefix).
uint64_t hot_region_bytes(uint64_t count, uint64_t bundle_bytes) {
  return count == 0 ? 0 : round_up(checked_mul(count, bundle_bytes, "hot bytes"), kHotRegionAlignment, "hot bytes");
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%llu bytes (%.1f MiB)", static_cast<unsigned long long>(bytes),
                static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

BudgetPlan plan_budget(const BudgetPlanInput& input) {
  const size_t n_layers = input.layers.size();
  if (n_layers == 0) throw std::invalid_argument("memory budget planner: no layers");
  if (input.pinned_layers == 0) throw std::invalid_argument("memory budget planner: pinned_layers must be at least 1");

  BudgetPlan plan;
  plan.resident_bytes = input.resident_bytes;
  double total_activations = 0.0;
  uint64_t full_bytes = input.resident_bytes;  // everything resident: every bundle hot
  std::vector<uint64_t> mins(n_layers);
  for (size_t l = 0; l < n_layers; ++l) {
    const LayerPlanInput& layer = input.layers[l];
    if (layer.n_ff == 0) bad_layer(l, "n_ff is 0");
    if (layer.bundle_bytes == 0) bad_layer(l, "bundle_bytes is 0");
    if (layer.frequency.size() != layer.n_ff) {
      bad_layer(l, std::to_string(layer.frequency.size()) + " frequencies for " + std::to_string(layer.n_ff) + " neurons");
    }
    for (size_t k = 0; k < layer.frequency.size(); ++k) {
      const float f = layer.frequency[k];
      if (!(f >= 0.0f && f <= 1.0f)) bad_layer(l, "frequency of bundle " + std::to_string(k) + " is not in [0, 1]");
      // The hot set is a prefix only because the pack stores bundles hottest first.
      if (k > 0 && f > layer.frequency[k - 1]) {
        bad_layer(l, "frequency of bundle " + std::to_string(k) + " exceeds bundle " + std::to_string(k - 1) +
                         "'s: bundles must be ordered hottest first");
      }
      total_activations += f;
    }
    plan.slot_bytes = std::max(plan.slot_bytes, round_up(layer.bundle_bytes, kSlotAlignment, "slot bytes"));
    full_bytes = checked_add(full_bytes, hot_region_bytes(layer.n_ff, layer.bundle_bytes), "the model's bytes");
    mins[l] = std::min<uint64_t>(layer.min_cold_slots, layer.n_ff);
  }

  // The reserve: the largest `pinned_layers` minimums can be pinned at once.
  std::vector<uint64_t> sorted_mins = mins;
  std::sort(sorted_mins.begin(), sorted_mins.end(), std::greater<>());
  uint64_t reserve_slots = 0;
  for (size_t i = 0; i < std::min<size_t>(input.pinned_layers, n_layers); ++i) reserve_slots += sorted_mins[i];
  const uint64_t reserve_bytes = checked_mul(reserve_slots, plan.slot_bytes, "cold reserve bytes");
  const uint64_t run_minimum = checked_add(input.resident_bytes, reserve_bytes, "the minimum budget");
  plan.minimum_bytes = std::min(run_minimum, full_bytes);

  plan.hot.assign(n_layers, 0);
  plan.hot_bytes.assign(n_layers, 0);
  if (input.budget_bytes >= full_bytes) {
    // Everything fits: no cold neurons, no cache slots needed.
    for (size_t l = 0; l < n_layers; ++l) {
      plan.hot[l] = input.layers[l].n_ff;
      plan.hot_bytes[l] = hot_region_bytes(input.layers[l].n_ff, input.layers[l].bundle_bytes);
      plan.hot_total_bytes += plan.hot_bytes[l];
    }
  } else {
    if (input.budget_bytes < run_minimum) {
      throw BudgetTooSmall("memory budget " + format_bytes(input.budget_bytes) + " is too small: the minimum is " +
                               format_bytes(plan.minimum_bytes) + " (" + format_bytes(input.resident_bytes) +
                               " resident + " + std::to_string(reserve_slots) + " cold slots of " +
                               std::to_string(plan.slot_bytes) + " bytes)",
                           plan.minimum_bytes);
    }
    const uint64_t available = input.budget_bytes - run_minimum;
    if (!(input.locality_tokens >= 0.0) || !std::isfinite(input.locality_tokens)) {
      throw std::invalid_argument("memory budget planner: locality_tokens must be a finite number >= 0");
    }

    // Greedy merge of the layers' prefixes by expected hits per byte. Ties (e.g. a pack without a
    // profile: every frequency 0) go to the layer with fewer hot neurons, so they spread evenly.
    struct Candidate {
      double key;  // frequency / bundle_bytes of the layer's next bundle
      uint32_t taken;
      uint32_t layer;
      bool operator<(const Candidate& o) const {  // priority_queue pops the largest
        if (key != o.key) return key < o.key;
        if (taken != o.taken) return taken > o.taken;
        return layer > o.layer;
      }
    };
    const auto make = [&](uint32_t l, uint32_t taken) {
      const LayerPlanInput& layer = input.layers[l];
      return Candidate{static_cast<double>(layer.frequency[taken]) / static_cast<double>(layer.bundle_bytes), taken, l};
    };
    // Fills the hot prefixes from scratch with at most `limit` bytes; returns the bytes spent.
    const auto fill_hot = [&](uint64_t limit) {
      std::fill(plan.hot.begin(), plan.hot.end(), 0u);
      std::fill(plan.hot_bytes.begin(), plan.hot_bytes.end(), 0ull);
      std::priority_queue<Candidate> queue;
      for (uint32_t l = 0; l < n_layers; ++l) queue.push(make(l, 0));
      uint64_t used = 0;
      while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        const LayerPlanInput& layer = input.layers[c.layer];
        const uint64_t grown = hot_region_bytes(c.taken + 1ull, layer.bundle_bytes);
        const uint64_t cost = grown - plan.hot_bytes[c.layer];
        // A layer whose next bundle does not fit is done: its later bundles cost at least as much.
        if (cost > limit - used) continue;
        used += cost;
        plan.hot[c.layer] = c.taken + 1;
        plan.hot_bytes[c.layer] = grown;
        if (c.taken + 1 < layer.n_ff) queue.push(make(c.layer, c.taken + 1));
      }
      return used;
    };
    const auto cold_activations = [&] {
      double sum = 0.0;
      for (size_t l = 0; l < n_layers; ++l) {
        for (uint32_t k = plan.hot[l]; k < input.layers[l].n_ff; ++k) sum += input.layers[l].frequency[k];
      }
      return sum;
    };
    uint64_t spent = fill_hot(available);
    if (input.locality_tokens > 0.0) {
      // Fewer hot neurons mean more cold activations and so a bigger target: iterate to the fixed
      // point (monotone and capped, so a few rounds settle it).
      const uint64_t cap = available / 2;
      uint64_t locality_bytes = 0;
      for (int round = 0; round < 8; ++round) {
        const double target_slots = input.locality_tokens * cold_activations();
        const double extra_slots = std::max(0.0, target_slots - static_cast<double>(reserve_slots));
        const double want_bytes = std::min(extra_slots * static_cast<double>(plan.slot_bytes), static_cast<double>(cap));
        const uint64_t want = static_cast<uint64_t>(want_bytes) / plan.slot_bytes * plan.slot_bytes;
        if (want <= locality_bytes) break;
        locality_bytes = want;
        spent = fill_hot(available - locality_bytes);
      }
    }
    plan.hot_total_bytes = spent;

    uint64_t cold_neurons = 0;
    for (size_t l = 0; l < n_layers; ++l) cold_neurons += input.layers[l].n_ff - plan.hot[l];
    const uint64_t extra = (available - spent) / plan.slot_bytes;
    const uint64_t cold = std::min({reserve_slots + extra, cold_neurons,
                                    static_cast<uint64_t>(std::numeric_limits<uint32_t>::max())});
    plan.cold_slots = static_cast<uint32_t>(cold);
  }
  plan.cold_total_bytes = static_cast<uint64_t>(plan.cold_slots) * plan.slot_bytes;
  plan.total_bytes = plan.resident_bytes + plan.hot_total_bytes + plan.cold_total_bytes;

  double hot_activations = 0.0;
  for (size_t l = 0; l < n_layers; ++l) {
    for (uint32_t k = 0; k < plan.hot[l]; ++k) hot_activations += input.layers[l].frequency[k];
  }
  plan.cold_activations_per_token = std::max(0.0, total_activations - hot_activations);
  plan.hot_activation_share = total_activations > 0.0 ? hot_activations / total_activations : 0.0;
  return plan;
}

uint64_t parse_memory_budget(std::string_view text, uint64_t model_file_bytes) {
  const std::string quoted = "memory budget \"" + std::string(text) + "\"";
  const auto fail = [&](const std::string& why) -> uint64_t {
    throw std::invalid_argument(quoted + ": " + why +
                                " (expected bytes, a size like 512M / 4G / 1.5GiB, or a percentage of the model file like 50%)");
  };
  if (text.empty()) return fail("empty");

  // Digits [. digits]: integer part and a fraction kept as numerator / 10^digits, exact.
  size_t i = 0;
  unsigned __int128 whole = 0;
  size_t whole_digits = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    whole = whole * 10 + static_cast<unsigned>(text[i] - '0');
    if (whole > kMax64) return fail("too large");
    ++i;
    ++whole_digits;
  }
  uint64_t frac = 0, frac_scale = 1;
  size_t frac_digits = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (frac_digits < 9) {  // finer than a billionth of a unit is noise, not a budget
        frac = frac * 10 + static_cast<unsigned>(text[i] - '0');
        frac_scale *= 10;
      }
      ++i;
      ++frac_digits;
    }
    if (frac_digits == 0) return fail("a decimal point needs digits after it");
  }
  if (whole_digits == 0) return fail("does not start with a number");
  const std::string_view suffix = text.substr(i);

  unsigned __int128 value = 0;
  if (suffix == "%") {
    if (model_file_bytes == 0) return fail("a percentage needs the model file's size");
    // percent = whole + frac / frac_scale; bytes = model * percent / 100.
    const unsigned __int128 scaled = whole * frac_scale + frac;  // percent * frac_scale
    if (scaled > static_cast<unsigned __int128>(100) * frac_scale) return fail("is above 100%");
    value = static_cast<unsigned __int128>(model_file_bytes) * scaled / (static_cast<unsigned __int128>(100) * frac_scale);
  } else {
    uint64_t unit = 1;
    std::string_view rest = suffix;
    if (!rest.empty()) {
      switch (rest[0]) {
        case 'k': case 'K': unit = 1ull << 10; break;
        case 'm': case 'M': unit = 1ull << 20; break;
        case 'g': case 'G': unit = 1ull << 30; break;
        case 't': case 'T': unit = 1ull << 40; break;
        default: return fail("unknown suffix \"" + std::string(rest) + "\"");
      }
      rest.remove_prefix(1);
      if (!(rest.empty() || rest == "B" || rest == "b" || rest == "iB" || rest == "ib")) {
        return fail("unknown suffix \"" + std::string(suffix) + "\"");
      }
    } else if (frac_digits > 0) {
      return fail("a byte count must be whole");
    }
    value = whole * unit + static_cast<unsigned __int128>(frac) * unit / frac_scale;
  }
  if (value > kMax64) return fail("too large");
  if (value == 0) return fail("is zero");
  return static_cast<uint64_t>(value);
}

}  // namespace ember::cache
