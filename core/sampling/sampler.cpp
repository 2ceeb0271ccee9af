#include "core/sampling/sampler.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/sampling/stages.h"

namespace ember {

namespace {
void require(bool ok, const char* field, const std::string& why) {
  if (!ok) throw std::invalid_argument(std::string("sampling: ") + field + " " + why);
}
}  // namespace

void validate_sampling_params(const SamplingParams& p, int32_t n_vocab) {
  require(n_vocab > 0, "n_vocab", "must be positive, got " + std::to_string(n_vocab));
  require(std::isfinite(p.temperature), "temperature", "must be finite");
  require(!std::isnan(p.top_p) && p.top_p >= 0.0f, "top_p", "must be >= 0, got " + std::to_string(p.top_p));
  require(!std::isnan(p.min_p) && p.min_p <= 1.0f, "min_p", "must be <= 1, got " + std::to_string(p.min_p));
  require(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f, "repeat_penalty",
          "must be > 0, got " + std::to_string(p.repeat_penalty));
  require(p.penalty_last_n >= 0 && p.penalty_last_n <= (1 << 20), "penalty_last_n",
          "must be in [0, 1048576], got " + std::to_string(p.penalty_last_n));
  require(std::isfinite(p.presence_penalty), "presence_penalty", "must be finite");
  require(std::isfinite(p.frequency_penalty), "frequency_penalty", "must be finite");
  for (const auto& [id, bias] : p.logit_bias) {
    require(id >= 0 && id < n_vocab, "logit_bias",
            "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    require(!std::isnan(bias) && bias != INFINITY, "logit_bias", "of token " + std::to_string(id) + " must be finite or -inf");
  }
}

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(params.seed) {
  validate_sampling_params(params, n_vocab);
  buffer_.resize(static_cast<size_t>(n_vocab));
  probs_.resize(static_cast<size_t>(n_vocab));
  if (!params.logit_bias.empty()) stages_.push_back(std::make_unique<LogitBiasStage>(params.logit_bias));
  const bool penalties = params.repeat_penalty != 1.0f || params.presence_penalty != 0.0f ||
                         params.frequency_penalty != 0.0f;
  if (penalties && params.penalty_last_n > 0)
    stages_.push_back(std::make_unique<PenaltyStage>(params.repeat_penalty, params.frequency_penalty,
                                                     params.presence_penalty, params.penalty_last_n, n_vocab));
  if (params.temperature <= 0.0f) return;  // greedy: the truncating stages cannot change the argmax
  if (params.top_k > 0) stages_.push_back(std::make_unique<TopKStage>(params.top_k));
  if (params.top_p < 1.0f) stages_.push_back(std::make_unique<TopPStage>(params.top_p));
  if (params.min_p > 0.0f) stages_.push_back(std::make_unique<MinPStage>(params.min_p));
  stages_.push_back(std::make_unique<TemperatureStage>(params.temperature));
}

Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

std::optional<int32_t> Sampler::sample(const float* logits) {
  for (int32_t i = 0; i < n_vocab_; ++i) buffer_[static_cast<size_t>(i)] = TokenLogit{i, logits[i]};
  CandidateSet c{buffer_.data(), buffer_.size(), false};
  for (auto& stage : stages_) stage->apply(c);

  // The first maximum among the pickable candidates (logit above -inf; NaN never is): the lowest
  // id among ties while the set is in id order.
  std::optional<size_t> pickable;
  for (size_t i = 0; i < c.size; ++i) {
    if (c.data[i].logit > -INFINITY && (!pickable || c.data[i].logit > c.data[*pickable].logit)) pickable = i;
  }
  if (!pickable) return std::nullopt;  // every token banned (or NaN): nothing to emit
  const size_t best = *pickable;
  if (params_.temperature <= 0.0f || c.size == 1) return c.data[best].id;

  const float max_logit = c.data[best].logit;
  double sum = 0.0;
  for (size_t i = 0; i < c.size; ++i) {
    probs_[i] = std::exp(c.data[i].logit - max_logit);
    sum += probs_[i];
  }
  if (!(sum > 0.0) || !std::isfinite(sum)) return c.data[best].id;  // NaN or +inf logits: the argmax
  const double target = rng_.next_unit() * sum;
  double cumulative = 0.0;
  for (size_t i = 0; i < c.size; ++i) {
    cumulative += probs_[i];
    if (target < cumulative) return c.data[i].id;
  }
  // Rounding left target at the very top: the last token that had any probability.
  for (size_t i = c.size; i-- > 0;)
    if (probs_[i] > 0.0f) return c.data[i].id;
  return c.data[best].id;
}

void Sampler::accept(int32_t token) {
  if (token < 0 || token >= n_vocab_)
    throw std::invalid_argument("sampling: accepted token " + std::to_string(token) + " is outside the vocabulary");
  for (auto& stage : stages_) stage->accept(token);
}

void Sampler::reset() {
  for (auto& stage : stages_) stage->reset();
  rng_.reseed(params_.seed);
}

}  // namespace ember
