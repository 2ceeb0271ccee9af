#include "core/model/generator.h"

#include <string>

#include "core/tokenizer/tokenizer.h"

namespace ember {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Length: return "length";
    case FinishReason::EndOfGeneration: return "stop";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "?";
}

GenerationStats generate(InferenceContext& ctx, Sampler& sampler, std::span<const int32_t> prompt,
                         const GenerationLimits& limits, const TokenSink& sink) {
  using Clock = std::chrono::steady_clock;
  GenerationStats stats;
  stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (prompt.empty()) throw std::invalid_argument("the prompt is empty (no tokens to evaluate)");
  if (limits.max_tokens < 0) throw std::invalid_argument("max_tokens must not be negative");
  const int64_t need = ctx.n_past() + stats.prompt_tokens + limits.max_tokens;
  if (need > ctx.n_ctx()) {
    throw ContextOverflow("prompt of " + std::to_string(stats.prompt_tokens) + " tokens + " +
                          std::to_string(limits.max_tokens) + " to generate" +
                          (ctx.n_past() ? " after " + std::to_string(ctx.n_past()) + " cached" : std::string()) +
                          " exceed the context of " + std::to_string(ctx.n_ctx()) + " tokens");
  }

  const Tokenizer& tok = ctx.model().tokenizer();
  IncrementalDetokenizer detok(tok);
  for (int32_t t : prompt) sampler.accept(t);

  const auto t0 = Clock::now();
  const float* logits = ctx.eval(prompt);
  const auto t1 = Clock::now();
  stats.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  // The first generated token comes from the prefill logits; decode time covers the single-token
  // evaluations after it.
  const auto decode_start = Clock::now();
  for (int64_t i = 0; i < limits.max_tokens; ++i) {
    const int32_t next = sampler.sample(logits);
    sampler.accept(next);
    if (limits.stop_at_end_of_generation && tok.is_end_of_generation(next)) {
      stats.finish = FinishReason::EndOfGeneration;
      break;
    }
    ++stats.generated_tokens;
    if (!sink(next, detok.push(next))) {
      stats.finish = FinishReason::Cancelled;
      break;
    }
    if (i + 1 == limits.max_tokens) break;  // the last token needs no evaluation
    logits = ctx.eval(std::span<const int32_t>(&next, 1));
    ++stats.decoded_tokens;
  }
  stats.decode_seconds = std::chrono::duration<double>(Clock::now() - decode_start).count();
  if (std::string rest = detok.flush(); !rest.empty()) sink(-1, rest);
  return stats;
}

}  // namespace ember
