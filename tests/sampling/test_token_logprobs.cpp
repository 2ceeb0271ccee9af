// log-softmax of the sampled-from logits and the top alternatives.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/sampling/token_logprobs.h"

using namespace ember;

TEST_CASE("token_logprobs: log-softmax, top-n order, masked tokens left out") {
  const std::vector<float> logits = {1.0f, 3.0f, -INFINITY, 3.0f, 0.0f};
  const double z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(0.0));
  const SampledLogprobs lp = token_logprobs(logits, 0, 10);
  CHECK(lp.chosen.id == 0);
  CHECK(lp.chosen.logprob == doctest::Approx(1.0 - z));
  REQUIRE(lp.top.size() == 4);  // the -inf token has no probability
  CHECK(lp.top[0].id == 1);     // ties: lower id first
  CHECK(lp.top[1].id == 3);
  CHECK(lp.top[2].id == 0);
  CHECK(lp.top[3].id == 4);
  double mass = 0;
  for (const auto& t : lp.top) mass += std::exp(t.logprob);
  CHECK(mass == doctest::Approx(1.0));
  CHECK(token_logprobs(logits, 4, 2).top.size() == 2);
  CHECK(token_logprobs(logits, 4, 0).top.empty());
  CHECK_THROWS(token_logprobs(logits, 5, 1));
}
