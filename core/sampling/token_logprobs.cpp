#include "core/sampling/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ember {

SampledLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int top_n) {
  if (chosen < 0 || static_cast<size_t>(chosen) >= logits.size()) {
    throw std::invalid_argument("token_logprobs: token " + std::to_string(chosen) + " is outside the logits");
  }
  float max_logit = -INFINITY;
  for (float l : logits) max_logit = std::max(max_logit, l);
  // Summed in double: a 128k vocabulary of small terms loses precision in float.
  double sum = 0.0;
  for (float l : logits) {
    if (l > -INFINITY) sum += std::exp(static_cast<double>(l) - max_logit);
  }
  const double log_z = static_cast<double>(max_logit) + std::log(sum);
  auto logprob = [&](float l) { return static_cast<float>(static_cast<double>(l) - log_z); };

  SampledLogprobs out;
  out.chosen = {chosen, logprob(logits[static_cast<size_t>(chosen)])};
  const auto n = static_cast<size_t>(std::clamp<int64_t>(top_n, 0, static_cast<int64_t>(logits.size())));
  if (n == 0) return out;
  // A bounded selection (n <= 20 in the API): one pass, the kept set sorted best first.
  auto better = [](const TokenLogprob& a, const TokenLogprob& b) {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.id < b.id);
  };
  out.top.reserve(n + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!(logits[i] > -INFINITY)) continue;
    if (out.top.size() == n && logits[i] <= logits[static_cast<size_t>(out.top.back().id)]) continue;
    const TokenLogprob t{static_cast<int32_t>(i), logits[i]};  // raw logit while selecting
    out.top.insert(std::upper_bound(out.top.begin(), out.top.end(), t, better), t);
    if (out.top.size() > n) out.top.pop_back();
  }
  for (TokenLogprob& t : out.top) t.logprob = logprob(t.logprob);
  return out;
}

}  // namespace ember
