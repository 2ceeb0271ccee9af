#pragma once
// One sequence's generation, advanced one forward pass at a time: a prefill chunk, or one
// generated token. The daemon's engine interleaves several of these (one per slot) so that
// concurrent streams progress together; generate() drives a single one to the end. Both paths run
// the same code, so they produce the same tokens for the same prompt, sampler and seed.
//
// Per generated token nothing is allocated here (buffers are sized in the constructor); the
// tokenizer's piece strings fit the small-string buffer for ordinary tokens.
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/model/generator.h"
#include "core/model/inference_context.h"
#include "core/model/stop_sequences.h"
#include "core/sampling/logit_constraint.h"
#include "core/sampling/sampler.h"
#include "core/tokenizer/tokenizer.h"

namespace ember {

struct SequenceOptions {
  GenerationLimits limits;
  std::vector<std::string> stop;  // stop sequences (see StopSequenceMatcher); empty strings ignored
  // The first `cached_prompt_tokens` prompt tokens are already the last positions of the context
  // (prefix reuse): they are not evaluated again, though the sampler still sees them. At least the
  // last prompt token is always evaluated, since its logits pick the first generated token.
  int64_t cached_prompt_tokens = 0;
  // Prompt tokens evaluated per step(); 0: the whole (remaining) prompt in one step.
  int64_t prefill_chunk = 0;
  // Constrained decoding: masks each step's logits (a copy) before the sampler sees them, and is
  // told the token drawn. Null: none. Must outlive the generator.
  LogitConstraint* constraint = nullptr;
  // Called for each generated token (not an end-of-generation one) with the logits it was sampled
  // from: the model's, after the constraint, before the sampler's stages (bias, penalties,
  // temperature). For log-probabilities; empty: not called.
  std::function<void(int32_t token, std::span<const float> logits)> on_sampled;
  // Prompt log-probabilities (echo): called with the model's logits after each prompt token but
  // the last, i.e. at `position` the distribution of prompt token position + 1. Set, the prompt is
  // evaluated one token per step (only the last row of a batch has logits) and none may be cached.
  std::function<void(int64_t position, std::span<const float> logits)> on_prompt_logits;
};

class SequenceGenerator {
 public:
  // `ctx` and `sampler` must outlive the generator, and nothing else may evaluate on `ctx` while
  // it runs. Throws std::invalid_argument (empty prompt, bad limits) or ContextOverflow (prompt +
  // max_tokens do not fit after what the context holds) before evaluating anything.
  SequenceGenerator(InferenceContext& ctx, Sampler& sampler, std::span<const int32_t> prompt,
                    const SequenceOptions& options);

  // One forward pass and what follows from it: the next prefill chunk, or (after the prompt) the
  // previous token's evaluation; whenever new logits exist, the next token is sampled and its text
  // handed to `sink`. Calls `sink(-1, tail)` once at the end for text held back until then.
  // A sink returning false ends the generation (FinishReason::Cancelled). No-op once done().
  void step(const TokenSink& sink);
  // Ends the generation now (FinishReason::Cancelled) and flushes held-back text to `sink`.
  void cancel(const TokenSink& sink);

  bool done() const { return phase_ == Phase::Done; }
  bool prefilling() const { return phase_ == Phase::Prefill; }
  // Prompt tokens evaluated so far (excluding the cached ones).
  int64_t prefilled_tokens() const { return stats_.prefill_tokens; }
  const GenerationStats& stats() const { return stats_; }

 private:
  enum class Phase { Prefill, Decode, Done };
  using Clock = std::chrono::steady_clock;

  // Samples from `logits`, streams the token's text and decides whether to go on.
  void sample_and_emit(const float* logits, const TokenSink& sink);
  void finish(FinishReason reason, const TokenSink& sink);

  InferenceContext& ctx_;
  Sampler& sampler_;
  const Tokenizer& tok_;
  std::vector<int32_t> prompt_;
  GenerationLimits limits_;
  int64_t prefill_chunk_;
  IncrementalDetokenizer detok_;
  StopSequenceMatcher stop_;
  std::string text_;  // the text released by the current step, reused
  Phase phase_ = Phase::Prefill;
  int32_t last_token_ = -1;  // sampled, not yet evaluated
  LogitConstraint* constraint_;
  std::function<void(int32_t, std::span<const float>)> on_sampled_;
  std::function<void(int64_t, std::span<const float>)> on_prompt_logits_;
  std::vector<float> masked_;  // the constrained copy of the logits (sized once when needed)
  GenerationStats stats_;
};

}  // namespace ember
