#pragma once
// The individual stages of the sampling chain (see sampler.h). Each one is tested on its own.
#include <cstdint>
#include <utility>
#include <vector>

#include "core/sampling/sampler.h"

namespace ember {

// Adds a per-token bias. PRECONDITION: the set is the full vocabulary in id order (first stage).
class LogitBiasStage final : public SamplerStage {
 public:
  explicit LogitBiasStage(std::vector<std::pair<int32_t, float>> bias) : bias_(std::move(bias)) {}
  void apply(CandidateSet& candidates) override;

 private:
  std::vector<std::pair<int32_t, float>> bias_;
};

// llama.cpp's repeat penalty plus OpenAI's presence/frequency penalties, over the last `last_n`
// accepted tokens (a ring buffer plus per-token counts, both allocated once).
class PenaltyStage final : public SamplerStage {
 public:
  PenaltyStage(float repeat, float frequency, float presence, int32_t last_n, int32_t n_vocab);
  void apply(CandidateSet& candidates) override;
  void accept(int32_t token) override;
  void reset() override;

 private:
  float repeat_, frequency_, presence_;
  std::vector<int32_t> ring_;
  size_t ring_next_ = 0;
  size_t ring_filled_ = 0;
  std::vector<int32_t> counts_;  // occurrences of each token id inside the ring
};

// Keeps the k highest logits, sorted descending.
class TopKStage final : public SamplerStage {
 public:
  explicit TopKStage(int32_t k) : k_(k) {}
  void apply(CandidateSet& candidates) override;

 private:
  int32_t k_;
};

// Keeps the smallest prefix (by descending probability) whose probability mass reaches p; at least 1.
class TopPStage final : public SamplerStage {
 public:
  explicit TopPStage(float p) : p_(p) {}
  void apply(CandidateSet& candidates) override;

 private:
  float p_;
};

// Keeps tokens whose probability is at least p times the most probable one's; at least 1.
class MinPStage final : public SamplerStage {
 public:
  explicit MinPStage(float p) : p_(p) {}
  void apply(CandidateSet& candidates) override;

 private:
  float p_;
};

// Divides logits by the temperature (> 0).
class TemperatureStage final : public SamplerStage {
 public:
  explicit TemperatureStage(float t) : t_(t) {}
  void apply(CandidateSet& candidates) override;

 private:
  float t_;
};

// Sorts descending by logit unless already sorted (std::sort does not allocate).
void sort_candidates(CandidateSet& candidates);

}  // namespace ember
