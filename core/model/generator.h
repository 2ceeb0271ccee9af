#pragma once
// The decode loop: evaluate a prompt, then sample, stream and evaluate one token at a time until
// a stop condition. Shared by `ember run`, the benchmarks and (later) the daemon's engine thread.
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "core/model/inference_context.h"
#include "core/sampling/sampler.h"

namespace ember {

enum class FinishReason { Length, EndOfGeneration, Cancelled };
const char* finish_reason_name(FinishReason r);

struct GenerationLimits {
  int64_t max_tokens = 128;
  bool stop_at_end_of_generation = true;  // EOS/EOT tokens end the generation (not emitted as text)
};

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0.0;
  int64_t decoded_tokens = 0;   // single-token evaluations after the prefill
  double decode_seconds = 0.0;  // time spent in them, sampling included
  FinishReason finish = FinishReason::Length;
  double prefill_tokens_per_s() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0.0; }
  double decode_tokens_per_s() const { return decode_seconds > 0 ? decoded_tokens / decode_seconds : 0.0; }
};

// Called with each generated token id and its newly complete text (UTF-8 safe, may be empty);
// once more at the end with token -1 if the detokenizer held back an incomplete UTF-8 tail.
// Return false to stop (FinishReason::Cancelled).
using TokenSink = std::function<bool(int32_t token, std::string_view text)>;

// Evaluates `prompt` after whatever the context already holds, then generates. Throws
// ContextOverflow (before evaluating anything) when prompt + max_tokens does not fit.
GenerationStats generate(InferenceContext& ctx, Sampler& sampler, std::span<const int32_t> prompt,
                         const GenerationLimits& limits, const TokenSink& sink);

}  // namespace ember
