#pragma once
// Token sampling: a chain of small stages built from SamplingParams, in llama.cpp's default order
// (logit bias, penalties, top-k, top-p, min-p, temperature, then a seeded draw; or argmax when
// greedy). All buffers are sized in the constructor, so sample() and accept() never allocate.
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/sampling/rng.h"

namespace ember {

struct SamplingParams {
  float temperature = 0.8f;       // <= 0: greedy
  int32_t top_k = 40;             // <= 0: off
  float top_p = 0.95f;            // >= 1: off
  float min_p = 0.05f;            // <= 0: off
  float repeat_penalty = 1.0f;    // 1: off (llama.cpp semantics: divide positive logits, multiply negative)
  int32_t penalty_last_n = 64;    // how many recent tokens the penalties look at; 0: penalties off
  float presence_penalty = 0.0f;  // OpenAI semantics: subtracted once from every token seen
  float frequency_penalty = 0.0f; // OpenAI semantics: subtracted once per occurrence
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logit; -inf bans the token
  uint64_t seed = 0;
};

// One candidate token during sampling.
struct TokenLogit {
  int32_t id;
  float logit;
};

// The working set the stages narrow down. `sorted` means descending by logit.
struct CandidateSet {
  TokenLogit* data = nullptr;
  size_t size = 0;
  bool sorted = false;
};

// One step of the chain. apply() may reorder and shrink the set but never allocates.
class SamplerStage {
 public:
  virtual ~SamplerStage() = default;
  virtual void apply(CandidateSet& candidates) = 0;
  virtual void accept(int32_t /*token*/) {}
  virtual void reset() {}
};

class Sampler {
 public:
  // Validates params (std::invalid_argument naming the field) and builds the chain.
  Sampler(const SamplingParams& params, int32_t n_vocab);
  ~Sampler();
  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;

  // Picks the next token from n_vocab logits (not modified). nullopt when no token can be picked:
  // every logit is -inf or NaN after the stages (e.g. logit_bias -100/-inf on every token). Then
  // there is nothing to sample, and no stand-in either: returning some id (token 0, the argmax of
  // an all -inf set) would emit a token the request banned. Callers end the generation there
  // (SequenceGenerator: FinishReason::EndOfGeneration, "stop" with no token); std::optional makes
  // them say so.
  [[nodiscard]] std::optional<int32_t> sample(const float* logits);
  // Records a token (prompt or generated) for the penalties. Throws on an id out of range.
  void accept(int32_t token);
  // New sequence: clears the history and re-seeds the generator.
  void reset();

  const SamplingParams& params() const { return params_; }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  SamplingParams params_;
  int32_t n_vocab_;
  std::vector<TokenLogit> buffer_;
  std::vector<std::unique_ptr<SamplerStage>> stages_;
  std::vector<float> probs_;  // scratch for the final draw
  Rng rng_;
};

// Validation alone, for callers (e.g. an HTTP handler) that want to reject a request early.
void validate_sampling_params(const SamplingParams& params, int32_t n_vocab);

}  // namespace ember
