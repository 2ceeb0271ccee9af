// cache::ActivationTracker: decay arithmetic (a silent bundle's weight halves per half-life), the
// lazy scaling against a direct per-token decay (renormalisation included), seeding, frequency
// bounds, bad input, and record() allocating nothing.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/cache/activation_tracker.h"
#include "tests/cache/allocation_counter.h"

using namespace ember::cache;

namespace {

std::vector<float> freq_of(const ActivationTracker& t, size_t layer) {
  std::vector<float> f(t.n_ff(layer));
  t.frequency(layer, f);
  return f;
}

// The definition: every token multiplies all counts by d, then adds 1 to the active ones.
struct DirectDecay {
  double d;
  std::vector<double> counts;
  double tokens = 0.0;
  void record(const std::vector<int32_t>& active) {
    for (double& c : counts) c *= d;
    tokens = tokens * d + 1.0;
    for (int32_t b : active) counts[static_cast<size_t>(b)] += 1.0;
  }
};

}  // namespace

TEST_CASE("tracker: a bundle that stops firing loses half its weight per half-life") {
  const std::vector<uint32_t> n_ff = {4};
  ActivationTracker t(n_ff, 10.0);
  const std::vector<int32_t> first = {0};
  const std::vector<int32_t> other = {1};
  t.record(0, first);
  CHECK(t.count(0, 0) == doctest::Approx(1.0));
  for (int i = 0; i < 10; ++i) t.record(0, other);
  CHECK(t.count(0, 0) == doctest::Approx(0.5).epsilon(1e-12));
  for (int i = 0; i < 10; ++i) t.record(0, other);
  CHECK(t.count(0, 0) == doctest::Approx(0.25).epsilon(1e-12));

  // Token weight: sum of d^i over the 21 tokens; bundle 1 fired in the last 20.
  const double d = std::exp2(-1.0 / 10.0);
  CHECK(t.tokens(0) == doctest::Approx((1.0 - std::pow(d, 21)) / (1.0 - d)).epsilon(1e-12));
  CHECK(t.count(0, 1) == doctest::Approx((1.0 - std::pow(d, 20)) / (1.0 - d)).epsilon(1e-12));
  CHECK(t.count(0, 2) == 0.0);
  const std::vector<float> f = freq_of(t, 0);
  CHECK(f[0] == doctest::Approx(0.25 / t.tokens(0)));
  CHECK(f[1] == doctest::Approx(t.count(0, 1) / t.tokens(0)));
  CHECK(f[3] == 0.0f);
}

TEST_CASE("tracker: lazy scaling matches a direct per-token decay, across renormalisations") {
  // Half-life 1 and 3.7: the growth factor passes 2^64 after 64 and ~237 tokens, so 3000 tokens
  // renormalise dozens of times.
  for (double h : {1.0, 3.7, 500.0}) {
    CAPTURE(h);
    const std::vector<uint32_t> n_ff = {7, 3};
    ActivationTracker t(n_ff, h);
    DirectDecay ref{std::exp2(-1.0 / h), std::vector<double>(7, 0.0)};
    uint32_t state = 12345;
    for (int step = 0; step < 3000; ++step) {
      std::vector<int32_t> active;
      for (int32_t b = 0; b < 7; ++b) {
        state = state * 1664525u + 1013904223u;
        // Bundle b fires with probability ~ (b + 1) / 8, and bundle 6 goes silent halfway.
        if ((state >> 8) % 8 < static_cast<uint32_t>(b + 1) && !(b == 6 && step > 1500)) active.push_back(b);
      }
      t.record(0, active);
      ref.record(active);
    }
    CHECK(t.tokens(0) == doctest::Approx(ref.tokens).epsilon(1e-9));
    const std::vector<float> f = freq_of(t, 0);
    for (uint32_t b = 0; b < 7; ++b) {
      CAPTURE(b);
      // A silent bundle decays towards 0; compare with an absolute floor.
      CHECK(std::abs(t.count(0, b) - ref.counts[b]) <= 1e-9 * ref.tokens + 1e-300);
      CHECK(f[b] == doctest::Approx(ref.counts[b] / ref.tokens).epsilon(1e-6));
      CHECK(f[b] >= 0.0f);
      CHECK(f[b] <= 1.0f);
    }
    // The other layer saw nothing.
    CHECK(t.tokens(1) == 0.0);
    CHECK(freq_of(t, 1) == std::vector<float>(3, 0.0f));
  }
}

TEST_CASE("tracker: frequency bounds") {
  const std::vector<uint32_t> n_ff = {3};
  ActivationTracker t(n_ff);
  CHECK(freq_of(t, 0) == std::vector<float>{0.0f, 0.0f, 0.0f});  // no weight yet
  const std::vector<int32_t> all = {0, 1, 2};
  for (int i = 0; i < 50; ++i) t.record(0, all);
  CHECK(freq_of(t, 0) == std::vector<float>{1.0f, 1.0f, 1.0f});
  // A repeated bundle (a caller bug) is counted twice but its frequency stays at most 1.
  const std::vector<int32_t> repeated = {2, 2};
  t.record(0, repeated);
  CHECK(freq_of(t, 0)[2] == 1.0f);
  CHECK(t.count(0, 2) <= t.tokens(0));
  const std::vector<int32_t> none;
  t.record(0, none);  // a token with nothing active still counts as a token
  CHECK(freq_of(t, 0)[0] < 1.0f);
}

TEST_CASE("tracker: no decay with an infinite half-life") {
  const std::vector<uint32_t> n_ff = {2};
  ActivationTracker t(n_ff, std::numeric_limits<double>::infinity());
  const std::vector<int32_t> a = {0};
  const std::vector<int32_t> b = {1};
  for (int i = 0; i < 30; ++i) t.record(0, a);
  for (int i = 0; i < 10; ++i) t.record(0, b);
  CHECK(t.tokens(0) == 40.0);
  CHECK(t.count(0, 0) == 30.0);
  CHECK(freq_of(t, 0) == std::vector<float>{0.75f, 0.25f});
}

TEST_CASE("tracker: seeding from the pack's frequencies, then live traffic takes over") {
  const std::vector<uint32_t> n_ff = {3, 2};
  ActivationTracker t(n_ff, 100.0);
  const std::vector<float> prior = {0.9f, 0.5f, 0.0f};
  t.seed(0, prior, 100.0);
  CHECK(t.tokens(0) == 100.0);
  CHECK(freq_of(t, 0) == prior);
  CHECK(t.tokens(1) == 0.0);  // other layers untouched

  // 100 tokens (one half-life) in which only bundle 2 fires: the prior now weighs 50 tokens.
  const std::vector<int32_t> cold = {2};
  for (int i = 0; i < 100; ++i) t.record(0, cold);
  const double d = std::exp2(-1.0 / 100.0);
  const double live = (1.0 - 0.5) / (1.0 - d);  // sum of d^i, i < 100
  CHECK(t.tokens(0) == doctest::Approx(50.0 + live).epsilon(1e-12));
  const std::vector<float> f = freq_of(t, 0);
  CHECK(f[0] == doctest::Approx(0.9 * 50.0 / (50.0 + live)).epsilon(1e-6));
  CHECK(f[2] == doctest::Approx(live / (50.0 + live)).epsilon(1e-6));
  CHECK(f[2] > f[0]);  // live traffic outweighs the prior after a half-life

  // Seeding again replaces the statistics.
  t.seed(0, prior, 0.0);
  CHECK(t.tokens(0) == 0.0);
  CHECK(freq_of(t, 0) == std::vector<float>{0.0f, 0.0f, 0.0f});
}

TEST_CASE("tracker: snapshot and restore") {
  const std::vector<uint32_t> n_ff = {3};
  ActivationTracker t(n_ff, 50.0);
  const std::vector<int32_t> a = {0, 2};
  for (int i = 0; i < 80; ++i) t.record(0, a);
  std::vector<double> counts(3);
  const double tokens = t.snapshot(0, counts);
  CHECK(tokens == doctest::Approx(t.tokens(0)));
  CHECK(counts[0] == doctest::Approx(t.count(0, 0)));
  CHECK(counts[1] == 0.0);

  ActivationTracker u(n_ff, 50.0);
  u.restore(0, counts, tokens);
  CHECK(freq_of(u, 0) == freq_of(t, 0));
  CHECK(u.tokens(0) == tokens);

  CHECK_THROWS_AS(u.restore(0, std::vector<double>{1.0, 0.0, std::nan("")}, 2.0), std::invalid_argument);
  CHECK_THROWS_AS(u.restore(0, std::vector<double>{-1.0, 0.0, 0.0}, 2.0), std::invalid_argument);
  CHECK_THROWS_AS(u.restore(0, std::vector<double>{3.0, 0.0, 0.0}, 2.0), std::invalid_argument);
  CHECK_THROWS_AS(u.restore(0, std::vector<double>{1.0, 0.0, 0.0}, -1.0), std::invalid_argument);
  CHECK_THROWS_AS(u.restore(0, std::vector<double>{1.0, 0.0}, 2.0), std::invalid_argument);
  CHECK(u.tokens(0) == tokens);  // a refused restore changes nothing
}

TEST_CASE("tracker: bad input") {
  const std::vector<uint32_t> none;
  CHECK_THROWS_AS(ActivationTracker{none}, std::invalid_argument);
  const std::vector<uint32_t> zero = {4, 0};
  CHECK_THROWS_AS(ActivationTracker{zero}, std::invalid_argument);
  const std::vector<uint32_t> huge = {0x80000000u};
  CHECK_THROWS_AS(ActivationTracker{huge}, std::invalid_argument);
  const std::vector<uint32_t> n_ff = {4};
  CHECK_THROWS_AS(ActivationTracker(n_ff, 0.5), std::invalid_argument);
  CHECK_THROWS_AS(ActivationTracker(n_ff, std::nan("")), std::invalid_argument);

  ActivationTracker t(n_ff, 10.0);
  const std::vector<int32_t> ok = {1};
  t.record(0, ok);
  const double before = t.tokens(0);
  const std::vector<int32_t> bad = {0, 4};
  const std::vector<int32_t> negative = {-1};
  CHECK_THROWS_AS(t.record(0, bad), std::out_of_range);
  CHECK_THROWS_AS(t.record(0, negative), std::out_of_range);
  CHECK_THROWS_AS(t.record(1, ok), std::out_of_range);
  CHECK(t.tokens(0) == before);  // nothing recorded by the refused calls
  CHECK(t.count(0, 0) == 0.0);

  std::vector<float> wrong(3);
  CHECK_THROWS_AS(t.frequency(0, wrong), std::invalid_argument);
  const std::vector<float> nan_prior = {0.1f, std::nanf(""), 0.0f, 0.0f};
  const std::vector<float> big_prior = {1.5f, 0.0f, 0.0f, 0.0f};
  const std::vector<float> fine = {0.5f, 0.0f, 0.0f, 0.0f};
  CHECK_THROWS_AS(t.seed(0, nan_prior, 10.0), std::invalid_argument);
  CHECK_THROWS_AS(t.seed(0, big_prior, 10.0), std::invalid_argument);
  CHECK_THROWS_AS(t.seed(0, fine, -1.0), std::invalid_argument);
  CHECK_THROWS_AS(t.seed(0, fine, std::numeric_limits<double>::infinity()), std::invalid_argument);
  CHECK_THROWS_AS(t.set_half_life(0.0), std::invalid_argument);
  CHECK(t.half_life() == 10.0);
}

TEST_CASE("tracker: record allocates nothing, renormalisation included") {
  const std::vector<uint32_t> n_ff = {64, 64};
  ActivationTracker t(n_ff, 1.0);  // renormalises every 64 tokens
  const std::vector<int32_t> active = {0, 5, 17, 63};
  const long before = ember::cache_test::allocations();
  for (int i = 0; i < 1000; ++i) {
    t.record(0, active);
    t.record(1, active);
  }
  CHECK(ember::cache_test::allocations() - before == 0);
  CHECK(t.count(0, 5) == doctest::Approx(t.tokens(0)));
}
