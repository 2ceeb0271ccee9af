#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/sampling/stages.h"

using namespace ember;

namespace {
std::vector<TokenLogit> full(const std::vector<float>& logits) {
  std::vector<TokenLogit> v;
  for (size_t i = 0; i < logits.size(); ++i) v.push_back({static_cast<int32_t>(i), logits[i]});
  return v;
}
std::vector<int32_t> ids(const CandidateSet& c) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < c.size; ++i) out.push_back(c.data[i].id);
  return out;
}
}  // namespace

TEST_CASE("logit bias adds to the named tokens, -inf bans") {
  auto v = full({1, 2, 3});
  CandidateSet c{v.data(), v.size(), false};
  LogitBiasStage({{0, 5.0f}, {2, -INFINITY}}).apply(c);
  CHECK(v[0].logit == 6.0f);
  CHECK(v[1].logit == 2.0f);
  CHECK(std::isinf(v[2].logit));
}

TEST_CASE("repeat penalty divides positive logits and multiplies negative ones") {
  PenaltyStage s(2.0f, 0.0f, 0.0f, 4, 4);
  s.accept(0);
  s.accept(1);
  auto v = full({4, -1, 3, 1});
  CandidateSet c{v.data(), v.size(), false};
  s.apply(c);
  CHECK(v[0].logit == 2.0f);
  CHECK(v[1].logit == -2.0f);
  CHECK(v[2].logit == 3.0f);
}

TEST_CASE("presence and frequency penalties follow OpenAI") {
  PenaltyStage s(1.0f, 0.5f, 1.0f, 8, 3);
  s.accept(0);
  s.accept(0);
  s.accept(0);
  s.accept(1);
  auto v = full({10, 10, 10});
  CandidateSet c{v.data(), v.size(), false};
  s.apply(c);
  CHECK(v[0].logit == doctest::Approx(10 - 3 * 0.5 - 1));
  CHECK(v[1].logit == doctest::Approx(10 - 0.5 - 1));
  CHECK(v[2].logit == 10.0f);
}

TEST_CASE("penalties only see the last n tokens, and reset clears them") {
  PenaltyStage s(2.0f, 0.0f, 0.0f, 2, 3);
  s.accept(0);
  s.accept(1);
  s.accept(2);  // pushes 0 out
  auto v = full({2, 2, 2});
  CandidateSet c{v.data(), v.size(), false};
  s.apply(c);
  CHECK(v[0].logit == 2.0f);
  CHECK(v[1].logit == 1.0f);
  CHECK(v[2].logit == 1.0f);
  s.reset();
  auto w = full({2, 2, 2});
  CandidateSet d{w.data(), w.size(), false};
  s.apply(d);
  CHECK(w[1].logit == 2.0f);
}

TEST_CASE("top-k keeps the k best, sorted") {
  auto v = full({0.1f, 3, 2, 5, 1});
  CandidateSet c{v.data(), v.size(), false};
  TopKStage(3).apply(c);
  CHECK(c.sorted);
  CHECK(ids(c) == std::vector<int32_t>{3, 1, 2});
}

TEST_CASE("top-p keeps the smallest prefix reaching p") {
  // probabilities 0.5, 0.25, 0.125, 0.125 (logits are logs of them)
  auto v = full({std::log(0.125f), std::log(0.5f), std::log(0.125f), std::log(0.25f)});
  {
    auto w = v;
    CandidateSet c{w.data(), w.size(), false};
    TopPStage(0.7f).apply(c);
    CHECK(ids(c) == std::vector<int32_t>{1, 3});
  }
  {
    auto w = v;
    CandidateSet c{w.data(), w.size(), false};
    TopPStage(0.75f).apply(c);  // exactly reached at 2 tokens
    CHECK(c.size == 2);
  }
  {
    auto w = v;
    CandidateSet c{w.data(), w.size(), false};
    TopPStage(0.0f).apply(c);
    CHECK(ids(c) == std::vector<int32_t>{1});
  }
}

TEST_CASE("min-p keeps tokens at least p times as likely as the best") {
  auto v = full({std::log(0.5f), std::log(0.3f), std::log(0.05f), std::log(0.15f)});
  CandidateSet c{v.data(), v.size(), false};
  MinPStage(0.25f).apply(c);  // threshold 0.125
  CHECK(c.size == 3);
  for (size_t i = 0; i < c.size; ++i) CHECK(c.data[i].id != 2);

  auto w = full({std::log(0.5f), std::log(0.3f), std::log(0.05f), std::log(0.15f)});
  CandidateSet s{w.data(), w.size(), false};
  sort_candidates(s);
  MinPStage(0.5f).apply(s);  // threshold 0.25
  CHECK(ids(s) == std::vector<int32_t>{0, 1});
}

TEST_CASE("temperature divides logits") {
  auto v = full({2, -4});
  CandidateSet c{v.data(), v.size(), false};
  TemperatureStage(0.5f).apply(c);
  CHECK(v[0].logit == 4.0f);
  CHECK(v[1].logit == -8.0f);
}
