// cache::prefix_plan_frequencies: the non-increasing isotonic fit (PAVA) of live frequencies,
// its properties, and that plan_budget over the fitted values picks the best prefix lengths
// (brute force over every allocation on tiny models).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/cache/budget_planner.h"
#include "core/cache/prefix_frequencies.h"

using namespace ember::cache;

namespace {

std::vector<float> fit(const std::vector<float>& live) {
  std::vector<float> out(live.size());
  prefix_plan_frequencies(live, out);
  return out;
}

double prefix_sum(const std::vector<float>& f, size_t k) {
  double s = 0.0;
  for (size_t i = 0; i < k; ++i) s += f[i];
  return s;
}

// k is a block boundary of the fit: 0, n, or where the fitted value changes.
bool at_boundary(const std::vector<float>& fitted, uint32_t k) {
  return k == 0 || k == fitted.size() || fitted[k - 1] != fitted[k];
}

struct Rng {
  uint32_t s;
  uint32_t next(uint32_t n) {
    s = s * 1664525u + 1013904223u;
    return (s >> 8) % n;
  }
};

}  // namespace

TEST_CASE("prefix fit: hand-checked cases") {
  CHECK(fit({0.2f, 0.8f, 0.5f}) == std::vector<float>{0.5f, 0.5f, 0.5f});
  CHECK(fit({0.9f, 0.1f, 0.3f, 0.2f}) == std::vector<float>{0.9f, 0.2f, 0.2f, 0.2f});
  // A hot bundle deep in a cold tail pulls the tail's value up as one block.
  CHECK(fit({0.8f, 0.0f, 0.0f, 0.0f, 0.6f}) == std::vector<float>{0.8f, 0.15f, 0.15f, 0.15f, 0.15f});
  CHECK(fit({}).empty());
  CHECK(fit({0.3f}) == std::vector<float>{0.3f});
}

TEST_CASE("prefix fit: an already non-increasing input comes back unchanged") {
  const std::vector<float> sorted = {1.0f, 0.7f, 0.7f, 0.31f, 0.0f, 0.0f};
  CHECK(fit(sorted) == sorted);
  std::vector<float> in_place = {0.1f, 0.3f, 0.2f};
  prefix_plan_frequencies(in_place, in_place);  // out may alias live
  CHECK(in_place == std::vector<float>{0.2f, 0.2f, 0.2f});
}

TEST_CASE("prefix fit: properties on random inputs") {
  Rng rng{7};
  for (int trial = 0; trial < 500; ++trial) {
    const size_t n = 1 + rng.next(40);
    std::vector<float> live(n);
    for (float& v : live) v = static_cast<float>(rng.next(1001)) / 1000.0f;
    const std::vector<float> out = fit(live);
    CAPTURE(trial);
    for (size_t k = 0; k < n; ++k) {
      CHECK(out[k] >= 0.0f);
      CHECK(out[k] <= 1.0f);
      if (k > 0) CHECK(out[k] <= out[k - 1]);
    }
    CHECK(prefix_sum(out, n) == doctest::Approx(prefix_sum(live, n)).epsilon(1e-6));
    // The fitted prefix sums majorise the live ones, and meet them at every block boundary.
    for (uint32_t k = 0; k <= n; ++k) {
      CHECK(prefix_sum(out, k) >= prefix_sum(live, k) - 1e-5);
      if (at_boundary(out, k)) CHECK(prefix_sum(out, k) == doctest::Approx(prefix_sum(live, k)).epsilon(1e-6));
    }
    // And the fit is unchanged by fitting again.
    CHECK(fit(out) == out);
  }
}

TEST_CASE("prefix fit: plan_budget over the fitted values picks the best prefixes") {
  // Tiny models (2-3 layers of 1-4 bundles, equal bundle bytes): for every budget, the best
  // prefix allocation by brute force. The planner over the fitted values never beats it (the
  // fit's value is an upper bound) and matches it whenever it stops at block boundaries.
  constexpr uint64_t kBundle = 4096;
  Rng rng{99};
  int exact_cases = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n_layers = 2 + rng.next(2);
    std::vector<std::vector<float>> live(n_layers), fitted(n_layers);
    uint32_t total = 0;
    for (size_t l = 0; l < n_layers; ++l) {
      live[l].resize(1 + rng.next(4));
      for (float& v : live[l]) v = static_cast<float>(rng.next(11)) / 10.0f;
      fitted[l] = fit(live[l]);
      total += static_cast<uint32_t>(live[l].size());
    }
    for (uint32_t budget = 0; budget <= total; ++budget) {
      CAPTURE(trial);
      CAPTURE(budget);
      // Brute force: every vector of prefix lengths within the budget.
      double best = 0.0;
      std::vector<uint32_t> k(n_layers, 0);
      while (true) {
        uint32_t used = 0;
        double value = 0.0;
        for (size_t l = 0; l < n_layers; ++l) {
          used += k[l];
          value += prefix_sum(live[l], k[l]);
        }
        if (used <= budget) best = std::max(best, value);
        size_t l = 0;
        while (l < n_layers && ++k[l] > live[l].size()) k[l++] = 0;
        if (l == n_layers) break;
      }

      BudgetPlanInput in;
      in.budget_bytes = budget * kBundle;
      for (size_t l = 0; l < n_layers; ++l) {
        in.layers.push_back({static_cast<uint32_t>(live[l].size()), kBundle, fitted[l], 0});
      }
      const BudgetPlan plan = plan_budget(in);
      double planned_live = 0.0, planned_fitted = 0.0;
      bool boundaries = true;
      for (size_t l = 0; l < n_layers; ++l) {
        planned_live += prefix_sum(live[l], plan.hot[l]);
        planned_fitted += prefix_sum(fitted[l], plan.hot[l]);
        boundaries = boundaries && at_boundary(fitted[l], plan.hot[l]);
      }
      CHECK(planned_fitted >= best - 1e-5);
      CHECK(planned_live <= best + 1e-5);
      if (boundaries) {
        ++exact_cases;
        CHECK(planned_live == doctest::Approx(best).epsilon(1e-5));
      }
    }
  }
  CHECK(exact_cases > 500);  // the exact case is the common one, not a corner
}

TEST_CASE("prefix fit: bad input") {
  std::vector<float> out(2);
  CHECK_THROWS_AS(prefix_plan_frequencies(std::vector<float>{0.1f, 0.2f, 0.3f}, out), std::invalid_argument);
  CHECK_THROWS_AS(prefix_plan_frequencies(std::vector<float>{0.1f, std::nanf("")}, out), std::invalid_argument);
  CHECK_THROWS_AS(prefix_plan_frequencies(std::vector<float>{1.5f, 0.0f}, out), std::invalid_argument);
  CHECK_THROWS_AS(prefix_plan_frequencies(std::vector<float>{-0.1f, 0.0f}, out), std::invalid_argument);
}
