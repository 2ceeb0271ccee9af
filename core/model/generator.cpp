#include "core/model/generator.h"

#include "core/model/sequence_generator.h"

namespace ember {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Length: return "length";
    case FinishReason::EndOfGeneration: return "stop";
    case FinishReason::StopSequence: return "stop";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "?";
}

GenerationStats generate(InferenceContext& ctx, Sampler& sampler, std::span<const int32_t> prompt,
                         const GenerationLimits& limits, const TokenSink& sink) {
  SequenceOptions options;
  options.limits = limits;
  // The whole prompt in one step: InferenceContext::eval splits it into max_batch chunks itself.
  SequenceGenerator seq(ctx, sampler, prompt, options);
  while (!seq.done()) seq.step(sink);
  return seq.stats();
}

}  // namespace ember
