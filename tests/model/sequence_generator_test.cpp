// The step-wise generator: the same tokens as generate() for the same seed, however its steps are
// chunked or interleaved with another sequence, with prefix reuse, and with stop sequences.
#include <doctest/doctest.h>

#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "core/model/generator.h"
#include "core/model/sequence_generator.h"
#include "tests/support/fixtures.h"
#include "tests/support/counting_new.h"

namespace ember {
namespace {

struct Run {
  std::vector<int32_t> tokens;
  std::string text;
  GenerationStats stats;
};

TokenSink collect(Run& r) {
  return [&r](int32_t id, std::string_view text) {
    if (id >= 0) r.tokens.push_back(id);
    r.text += text;
    return true;
  };
}

SamplingParams seeded(uint64_t seed) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.seed = seed;
  return p;
}

Run with_generate(const Model& model, ThreadPool& pool, const std::vector<int32_t>& prompt, const SamplingParams& sp,
                  int64_t max_tokens) {
  InferenceContext ctx(model, pool, {});
  Sampler sampler(sp, static_cast<int32_t>(model.config().n_vocab));
  GenerationLimits limits;
  limits.max_tokens = max_tokens;
  Run r;
  r.stats = generate(ctx, sampler, prompt, limits, collect(r));
  return r;
}

}  // namespace

TEST_CASE("sequence generator: step-wise, chunked and interleaved runs equal generate()" *
          ember::test::needs_fixtures) {
  auto path = test::fixture("models/stories260K.gguf");
  if (!path) return;
  auto model = Model::load(path->string());
  ThreadPool pool(2);
  const Tokenizer& tok = model->tokenizer();
  const auto n_vocab = static_cast<int32_t>(model->config().n_vocab);
  const std::vector<int32_t> p1 = tok.encode("Once upon a time, there was a little girl named Lily", true, false);
  const std::vector<int32_t> p2 = tok.encode("The cat sat on the mat and", true, false);
  const Run ref1 = with_generate(*model, pool, p1, seeded(7), 40);
  const Run ref2 = with_generate(*model, pool, p2, seeded(99), 40);
  REQUIRE(!ref1.tokens.empty());
  CHECK(ref1.text == tok.decode(ref1.tokens));

  // Two sequences on two contexts, advanced alternately, prefill in chunks of 3 tokens (smaller
  // than max_batch, so the chunking is the generator's own).
  ContextOptions co;
  co.max_batch = 4;
  InferenceContext c1(*model, pool, co), c2(*model, pool, co);
  Sampler s1(seeded(7), n_vocab), s2(seeded(99), n_vocab);
  SequenceOptions o;
  o.limits.max_tokens = 40;
  o.prefill_chunk = 3;
  SequenceGenerator g1(c1, s1, p1, o), g2(c2, s2, p2, o);
  Run r1, r2;
  const TokenSink k1 = collect(r1), k2 = collect(r2);
  int prefill_steps = 0;
  while (!g1.done() || !g2.done()) {
    if (g1.prefilling()) ++prefill_steps;
    g1.step(k1);
    g2.step(k2);
  }
  CHECK(prefill_steps == static_cast<int>((p1.size() + 2) / 3));
  CHECK(r1.tokens == ref1.tokens);
  CHECK(r2.tokens == ref2.tokens);
  CHECK(r1.text == ref1.text);
  CHECK(g1.stats().generated_tokens == ref1.stats.generated_tokens);
  CHECK(g1.stats().finish == ref1.stats.finish);
  CHECK(g1.stats().prefill_tokens == static_cast<int64_t>(p1.size()));
}

TEST_CASE("sequence generator: a reused prompt prefix gives the same greedy tokens as a fresh context" *
          ember::test::needs_fixtures) {
  auto path = test::fixture("models/stories260K.gguf");
  if (!path) return;
  auto model = Model::load(path->string());
  ThreadPool pool(2);
  const Tokenizer& tok = model->tokenizer();
  const auto n_vocab = static_cast<int32_t>(model->config().n_vocab);
  SamplingParams greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> first = tok.encode("Once upon a time, there was a dog", true, false);
  const std::vector<int32_t> second = tok.encode("Once upon a time, there was a big red ball", true, false);
  const Run fresh = with_generate(*model, pool, second, greedy, 32);

  InferenceContext ctx(*model, pool, {});
  {
    Sampler s(greedy, n_vocab);
    SequenceGenerator g(ctx, s, first, {});
    Run ignored;
    const TokenSink k = collect(ignored);
    while (!g.done()) g.step(k);
  }
  int64_t shared = 0;
  while (first[shared] == second[shared]) ++shared;
  REQUIRE(shared > 2);
  ctx.truncate(shared);
  Sampler s(greedy, n_vocab);
  SequenceOptions o;
  o.limits.max_tokens = 32;
  o.cached_prompt_tokens = shared;
  SequenceGenerator g(ctx, s, second, o);
  Run reused;
  const TokenSink k = collect(reused);
  while (!g.done()) g.step(k);
  CHECK(reused.tokens == fresh.tokens);
  CHECK(g.stats().cached_prompt_tokens == shared);
  CHECK(g.stats().prefill_tokens == static_cast<int64_t>(second.size()) - shared);

  // The whole prompt cached is not allowed: the last token's logits are needed.
  o.cached_prompt_tokens = static_cast<int64_t>(second.size());
  CHECK_THROWS_AS(SequenceGenerator(ctx, s, second, o), std::invalid_argument);
}

TEST_CASE("sequence generator: a stop sequence ends the text before it, across tokens" *
          ember::test::needs_fixtures) {
  auto path = test::fixture("models/stories260K.gguf");
  if (!path) return;
  auto model = Model::load(path->string());
  ThreadPool pool(2);
  const Tokenizer& tok = model->tokenizer();
  const auto n_vocab = static_cast<int32_t>(model->config().n_vocab);
  SamplingParams greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = tok.encode("Once upon a time", true, false);
  const Run full = with_generate(*model, pool, prompt, greedy, 48);
  REQUIRE(full.text.size() > 40);
  // A stop string from the middle of the text, long enough to span several tokens.
  const std::string stop = full.text.substr(20, 9);
  const size_t at = full.text.find(stop);

  auto run_with = [&](std::vector<std::string> stops, int64_t max_tokens) {
    InferenceContext ctx(*model, pool, {});
    Sampler s(greedy, n_vocab);
    SequenceOptions o;
    o.limits.max_tokens = max_tokens;
    o.stop = std::move(stops);
    SequenceGenerator g(ctx, s, prompt, o);
    Run r;
    const TokenSink k = collect(r);
    while (!g.done()) g.step(k);
    r.stats = g.stats();
    return r;
  };
  const Run stopped = run_with({"never appears \x01", stop}, 48);
  CHECK(stopped.stats.finish == FinishReason::StopSequence);
  CHECK(stopped.text == full.text.substr(0, at));
  CHECK(stopped.text.find(stop) == std::string::npos);
  CHECK(stopped.stats.generated_tokens < full.stats.generated_tokens);
  CHECK(std::string(finish_reason_name(FinishReason::StopSequence)) == "stop");

  // Held-back text (a stop string's beginning at the very end) is flushed when the length ends it.
  const Run partial = run_with({full.text.substr(full.text.size() - 2) + "\x01"}, 48);
  CHECK(partial.stats.finish == full.stats.finish);
  CHECK(partial.text == full.text);
}

TEST_CASE("sequence generator: generate() checks limits before evaluating anything" *
          ember::test::needs_fixtures) {
  auto path = test::fixture("models/stories260K.gguf");
  if (!path) return;
  auto model = Model::load(path->string());
  ThreadPool pool(1);
  ContextOptions co;
  co.n_ctx = 16;
  InferenceContext ctx(*model, pool, co);
  Sampler s(SamplingParams{}, static_cast<int32_t>(model->config().n_vocab));
  const std::vector<int32_t> prompt = {1, 2, 3, 4};
  SequenceOptions o;
  o.limits.max_tokens = 13;
  CHECK_THROWS_AS(SequenceGenerator(ctx, s, prompt, o), ContextOverflow);
  CHECK(ctx.n_past() == 0);
  o.limits.max_tokens = 0;
  SequenceGenerator g(ctx, s, prompt, o);
  Run r;
  const TokenSink k = collect(r);
  g.step(k);
  CHECK(g.done());
  CHECK(g.stats().finish == FinishReason::Length);
  CHECK(r.tokens.empty());
  CHECK_THROWS_AS(SequenceGenerator(ctx, s, std::vector<int32_t>{}, o), std::invalid_argument);
}

}  // namespace ember

namespace ember {

TEST_CASE("sequence generator: decode steps do not allocate" * ember::test::needs_fixtures) {
  auto path = test::fixture("models/stories260K.gguf");
  if (!path) return;
  auto model = Model::load(path->string());
  ThreadPool pool(1);
  InferenceContext ctx(*model, pool, {});
  SamplingParams sp;
  sp.seed = 3;
  sp.repeat_penalty = 1.1f;
  sp.frequency_penalty = 0.5f;
  Sampler sampler(sp, static_cast<int32_t>(model->config().n_vocab));
  const std::vector<int32_t> prompt = model->tokenizer().encode("Once upon a time", true, false);
  SequenceOptions o;
  o.limits.max_tokens = 64;
  o.limits.stop_at_end_of_generation = false;
  o.stop = {"zzzz never", "qqq"};
  SequenceGenerator g(ctx, sampler, prompt, o);
  size_t bytes = 0;
  const TokenSink sink = [&bytes](int32_t, std::string_view text) {
    bytes += text.size();
    return true;
  };
  g.step(sink);  // the prefill
  // The pool has one thread (this one), so nothing else allocates meanwhile.
  const long before = test::allocation_count();
  while (!g.done()) g.step(sink);
  const long allocations = test::allocation_count() - before;
  CHECK(g.stats().generated_tokens == 64);
  CHECK(bytes > 0);
  CHECK(allocations == 0);
}

}  // namespace ember
