#include "core/model/sequence_generator.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

namespace ember {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

SequenceGenerator::SequenceGenerator(InferenceContext& ctx, Sampler& sampler, std::span<const int32_t> prompt,
                                     const SequenceOptions& options)
    : ctx_(ctx),
      sampler_(sampler),
      tok_(ctx.model().tokenizer()),
      prompt_(prompt.begin(), prompt.end()),
      limits_(options.limits),
      prefill_chunk_(options.prefill_chunk),
      detok_(tok_),
      stop_(options.stop),
      constraint_(options.constraint),
      on_sampled_(options.on_sampled),
      on_prompt_logits_(options.on_prompt_logits) {
  const auto n_prompt = static_cast<int64_t>(prompt_.size());
  const int64_t cached = options.cached_prompt_tokens;
  if (prompt_.empty()) throw std::invalid_argument("the prompt is empty (no tokens to evaluate)");
  if (limits_.max_tokens < 0) throw std::invalid_argument("max_tokens must not be negative");
  if (prefill_chunk_ < 0) throw std::invalid_argument("prefill_chunk must not be negative");
  if (on_prompt_logits_ && cached != 0) {
    throw std::invalid_argument("prompt log-probabilities need the whole prompt evaluated (no cached prefix)");
  }
  if (on_prompt_logits_) prefill_chunk_ = 1;
  if (cached < 0 || cached >= n_prompt || cached > ctx.n_past()) {
    throw std::invalid_argument("cached_prompt_tokens (" + std::to_string(cached) +
                                ") must leave at least one prompt token to evaluate and be in the context");
  }
  const int64_t to_eval = n_prompt - cached;
  const int64_t need = ctx.n_past() + to_eval + limits_.max_tokens;
  if (need > ctx.n_ctx()) {
    throw ContextOverflow("prompt of " + std::to_string(n_prompt) + " tokens + " +
                          std::to_string(limits_.max_tokens) + " to generate" +
                          (ctx.n_past() > cached ? " after " + std::to_string(ctx.n_past() - cached) + " cached"
                                                 : std::string()) +
                          " exceed the context of " + std::to_string(ctx.n_ctx()) + " tokens");
  }
  stats_.prompt_tokens = n_prompt;
  stats_.cached_prompt_tokens = cached;
  // The penalties look at the whole prompt, cached part included, exactly as without reuse.
  for (int32_t t : prompt_) sampler_.accept(t);
  text_.reserve(256);
  if (constraint_ || on_sampled_) masked_.resize(static_cast<size_t>(sampler_.n_vocab()));
}

void SequenceGenerator::step(const TokenSink& sink) {
  if (phase_ == Phase::Prefill) {
    const int64_t first = stats_.cached_prompt_tokens + stats_.prefill_tokens;
    const int64_t remaining = stats_.prompt_tokens - first;
    const int64_t n = prefill_chunk_ > 0 ? std::min(prefill_chunk_, remaining) : remaining;
    const auto t0 = Clock::now();
    const float* logits = ctx_.eval(std::span<const int32_t>(prompt_.data() + first, static_cast<size_t>(n)));
    stats_.prefill_seconds += seconds_since(t0);
    stats_.prefill_tokens += n;
    if (on_prompt_logits_ && n < remaining) {
      on_prompt_logits_(first, std::span<const float>(logits, static_cast<size_t>(sampler_.n_vocab())));
    }
    if (n < remaining) return;
    phase_ = Phase::Decode;
    if (limits_.max_tokens == 0) return finish(FinishReason::Length, sink);
    // The first generated token comes from the prefill's logits; its sampling counts as decode.
    const auto t1 = Clock::now();
    sample_and_emit(logits, sink);
    stats_.decode_seconds += seconds_since(t1);
  } else if (phase_ == Phase::Decode) {
    const auto t0 = Clock::now();
    const float* logits = ctx_.eval(std::span<const int32_t>(&last_token_, 1));
    ++stats_.decoded_tokens;
    sample_and_emit(logits, sink);
    stats_.decode_seconds += seconds_since(t0);
  }
}

void SequenceGenerator::cancel(const TokenSink& sink) {
  if (phase_ != Phase::Done) finish(FinishReason::Cancelled, sink);
}

void SequenceGenerator::sample_and_emit(const float* logits, const TokenSink& sink) {
  if (!masked_.empty()) {
    std::copy(logits, logits + masked_.size(), masked_.begin());
    if (constraint_) constraint_->mask(masked_);
    logits = masked_.data();
  }
  const std::optional<int32_t> sampled = sampler_.sample(logits);
  // Every token is masked (logit_bias -100 on all of them, say): there is nothing the request
  // allows to emit, so the generation ends here as if the model had ended it ("stop" in the API),
  // with no token and no text; emitting some stand-in id would break the request's own mask.
  if (!sampled) return finish(FinishReason::EndOfGeneration, sink);
  const int32_t next = *sampled;
  sampler_.accept(next);
  if (constraint_) constraint_->accept(next);
  if (limits_.stop_at_end_of_generation && tok_.is_end_of_generation(next)) {
    return finish(FinishReason::EndOfGeneration, sink);
  }
  if (on_sampled_) on_sampled_(next, std::span<const float>(masked_));
  ++stats_.generated_tokens;
  text_.clear();
  const bool hit = stop_.push(detok_.push(next), text_);
  if (!sink(next, text_)) return finish(FinishReason::Cancelled, sink);
  if (hit) return finish(FinishReason::StopSequence, sink);
  if (stats_.generated_tokens == limits_.max_tokens) return finish(FinishReason::Length, sink);
  last_token_ = next;  // evaluated by the next step
}

void SequenceGenerator::finish(FinishReason reason, const TokenSink& sink) {
  phase_ = Phase::Done;
  if (reason != FinishReason::StopSequence) {
    // An incomplete UTF-8 tail, then whatever the stop matcher held back. The tail itself may
    // complete a stop string; what precedes it is still released.
    text_.clear();
    const bool hit = stop_.push(detok_.flush(), text_);
    if (!hit) stop_.flush(text_);
    if (hit && reason != FinishReason::Cancelled) reason = FinishReason::StopSequence;
    if (!text_.empty()) sink(-1, text_);
  }
  stats_.finish = reason;
}

}  // namespace ember
