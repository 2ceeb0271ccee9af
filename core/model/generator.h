#pragma once
// The decode loop: evaluate a prompt, then sample, stream and evaluate one token at a time until
// a stop condition. generate() runs one sequence to the end (`ember run`, the benchmarks); the
// daemon's engine steps several SequenceGenerators (core/model/sequence_generator.h) in turn.
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "core/model/inference_context.h"
#include "core/sampling/sampler.h"

namespace ember {

enum class FinishReason {
  Length,           // max_tokens generated
  EndOfGeneration,  // the model produced an end-of-generation token, or no token could be sampled
                    // (the request masked every one, e.g. logit_bias -100 on all): no token emitted
  StopSequence,     // the text reached one of the request's stop strings
  Cancelled,        // the caller stopped it
};
const char* finish_reason_name(FinishReason r);

struct GenerationLimits {
  int64_t max_tokens = 128;
  bool stop_at_end_of_generation = true;  // EOS/EOT tokens end the generation (not emitted as text)
};

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // of prompt_tokens, already in the context (prefix reuse)
  int64_t prefill_tokens = 0;        // of prompt_tokens, evaluated (fewer if cancelled mid-prompt)
  int64_t generated_tokens = 0;
  double prefill_seconds = 0.0;
  int64_t decoded_tokens = 0;   // single-token evaluations after the prefill
  double decode_seconds = 0.0;  // time spent in them, sampling included
  FinishReason finish = FinishReason::Length;
  double prefill_tokens_per_s() const { return prefill_seconds > 0 ? prefill_tokens / prefill_seconds : 0.0; }
  double decode_tokens_per_s() const { return decode_seconds > 0 ? decoded_tokens / decode_seconds : 0.0; }
};

// Called with each generated token id and its newly complete text (UTF-8 safe, may be empty; text
// that may begin a stop sequence is held back); once more at the end with token -1 for what was
// held back (an incomplete UTF-8 tail, an undecided stop-sequence start), if anything.
// Return false to stop (FinishReason::Cancelled).
using TokenSink = std::function<bool(int32_t token, std::string_view text)>;

// Evaluates `prompt` after whatever the context already holds, then generates. Throws
// ContextOverflow (before evaluating anything) when prompt + max_tokens does not fit.
GenerationStats generate(InferenceContext& ctx, Sampler& sampler, std::span<const int32_t> prompt,
                         const GenerationLimits& limits, const TokenSink& sink);

}  // namespace ember
