// The engine thread on its own (no HTTP): slots, round-robin interleaving, cancellation,
// shutdown, prefix reuse, stop sequences and metrics, over a tiny synthetic model.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/cache/budget_planner.h"
#include "core/cache/fetch_error.h"
#include "core/model/generator.h"
#include "core/pack/pack_writer.h"
#include "server/engine_worker.h"
#include "tests/server/tiny_model.h"

namespace ember::server {
namespace {

const std::string& engine_model_path() { return test_server::tiny_model_path(); }

std::unique_ptr<EngineWorker> make_engine(int slots, bool reuse = true, int64_t max_batch = 512, size_t queue = 16) {
  EngineOptions eo;
  eo.threads = 1;
  eo.context.n_ctx = 256;
  eo.context.max_batch = max_batch;
  eo.slots = slots;
  eo.reuse_prefix = reuse;
  eo.max_queued_jobs = queue;
  return std::make_unique<EngineWorker>(Model::load(engine_model_path()), eo);
}

// One job's results, filled by the engine thread and read after `done` is ready.
struct Outcome {
  std::string text;
  std::vector<std::string> pieces;
  GenerationStats stats;
  std::exception_ptr error;
  std::promise<void> finished;
  std::future<void> done = finished.get_future();
  std::chrono::steady_clock::time_point first_text{};
};

GenerationJob make_job(const EngineWorker& engine, const std::string& prompt, Outcome& out, int64_t max_tokens = 16,
                       float temperature = 0.9f, uint64_t seed = 1) {
  GenerationJob job;
  job.prompt = engine.model().tokenizer().encode(prompt, true, false);
  job.sampling.temperature = temperature;
  job.sampling.seed = seed;
  job.max_tokens = max_tokens;
  job.on_text = [&out](std::string_view t) {
    if (out.pieces.empty()) out.first_text = std::chrono::steady_clock::now();
    out.text += t;
    out.pieces.emplace_back(t);
  };
  job.on_done = [&out](const GenerationStats& s, std::exception_ptr e) {
    out.stats = s;
    out.error = e;
    out.finished.set_value();
  };
  return job;
}

bool wait(Outcome& o) { return o.done.wait_for(std::chrono::seconds(60)) == std::future_status::ready; }

const std::vector<std::string> kPrompts = {"the quick brown fox", "hello there", "a b c d e f", "once upon a time",
                                           "the", "numbers one two three", "why is the sky", "x"};

}  // namespace

TEST_CASE("engine: concurrent seeded jobs give the same text as one at a time") {
  std::vector<std::string> sequential;
  {
    auto engine = make_engine(1);
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      Outcome o;
      REQUIRE(engine->try_submit(make_job(*engine, kPrompts[i], o, 12, 0.9f, 100 + i)));
      REQUIRE(wait(o));
      CHECK(!o.error);
      CHECK(o.stats.generated_tokens > 0);
      sequential.push_back(o.text);
    }
  }
  // Four slots, prefill chunks of 3 tokens: all eight progress in turns and still match.
  auto engine = make_engine(4, true, 3);
  std::vector<Outcome> outs(kPrompts.size());
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    REQUIRE(engine->try_submit(make_job(*engine, kPrompts[i], outs[i], 12, 0.9f, 100 + i)));
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    REQUIRE(wait(outs[i]));
    CHECK(!outs[i].error);
    CHECK(outs[i].text == sequential[i]);
  }
  const EngineMetrics m = engine->metrics();
  CHECK(m.slots == 4);
  CHECK(m.jobs_completed == kPrompts.size());
  CHECK(m.active_jobs == 0);
  CHECK(m.queued_jobs == 0);
  CHECK(engine->pending() == 0);
}

TEST_CASE("engine: active streams progress together, one token each in turn") {
  auto engine = make_engine(2);
  std::vector<int> order;  // which job each piece came from, in engine order
  Outcome a, b;
  GenerationJob ja = make_job(*engine, "the quick brown fox", a, 20, 0.0f);
  GenerationJob jb = make_job(*engine, "hello there", b, 20, 0.0f);
  auto tag = [&order](GenerationJob& j, int id) {
    j.on_text = [&order, id, inner = j.on_text](std::string_view t) {
      order.push_back(id);
      inner(t);
    };
  };
  tag(ja, 0);
  tag(jb, 1);
  // Job 0's first piece waits until job 1 is queued, so the test does not depend on thread timing.
  std::promise<void> queued;
  std::shared_future<void> go = queued.get_future().share();
  ja.on_text = [go, inner = ja.on_text](std::string_view t) {
    go.wait();
    inner(t);
  };
  REQUIRE(engine->try_submit(std::move(ja)));
  REQUIRE(engine->try_submit(std::move(jb)));
  queued.set_value();
  REQUIRE(wait(a));
  REQUIRE(wait(b));
  REQUIRE(a.stats.generated_tokens > 4);
  REQUIRE(b.stats.generated_tokens > 4);
  // Job 1 started streaming long before job 0 ended.
  size_t last0 = 0, first1 = order.size();
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] == 0) last0 = i;
    if (order[i] == 1 && first1 == order.size()) first1 = i;
  }
  CHECK(first1 < 4);
  CHECK(last0 > first1 + 4);
}

TEST_CASE("engine: with one slot, jobs run first in, first out") {
  auto engine = make_engine(1);
  std::vector<int> finished;
  std::vector<Outcome> outs(3);
  for (int i = 0; i < 3; ++i) {
    GenerationJob j = make_job(*engine, kPrompts[i], outs[i], 6);
    j.on_done = [&finished, &outs, i](const GenerationStats& s, std::exception_ptr e) {
      finished.push_back(i);
      outs[i].stats = s;
      outs[i].finished.set_value();
    };
    REQUIRE(engine->try_submit(std::move(j)));
  }
  for (auto& o : outs) REQUIRE(wait(o));
  CHECK(finished == std::vector<int>{0, 1, 2});
}

TEST_CASE("engine: a cancelled job stops within one token and frees its slot") {
  auto engine = make_engine(1);
  Outcome o;
  GenerationJob job = make_job(*engine, "the quick brown fox", o, 200);
  auto flag = job.cancelled;
  job.on_text = [&o, flag](std::string_view t) {
    o.pieces.emplace_back(t);
    if (o.pieces.size() == 3) flag->store(true);
  };
  // Queued behind it: cancelled while waiting, it leaves the queue without running.
  Outcome q;
  GenerationJob queued = make_job(*engine, "hello", q, 5);
  queued.cancelled->store(true);
  REQUIRE(engine->try_submit(std::move(job)));
  REQUIRE(engine->try_submit(std::move(queued)));
  REQUIRE(wait(o));
  REQUIRE(wait(q));
  CHECK(!o.error);
  CHECK(o.stats.finish == FinishReason::Cancelled);
  CHECK(o.stats.generated_tokens == 3);
  CHECK(!q.error);
  CHECK(q.stats.finish == FinishReason::Cancelled);
  CHECK(q.stats.generated_tokens == 0);
  const EngineMetrics m = engine->metrics();
  CHECK(m.jobs_cancelled == 2);
  CHECK(m.active_jobs == 0);
  // The slot serves the next job.
  Outcome next;
  REQUIRE(engine->try_submit(make_job(*engine, "hello", next, 5)));
  REQUIRE(wait(next));
  CHECK(next.stats.finish != FinishReason::Cancelled);
  CHECK(engine->metrics().jobs_completed == 1);
}

TEST_CASE("engine: stop() ends running jobs and fails queued ones") {
  auto engine = make_engine(1);
  Outcome running, queued;
  std::promise<void> started;
  GenerationJob job = make_job(*engine, "the quick brown fox", running, 200);
  job.on_text = [&running, &started](std::string_view t) {
    if (running.pieces.empty()) started.set_value();
    running.pieces.emplace_back(t);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  REQUIRE(engine->try_submit(std::move(job)));
  REQUIRE(engine->try_submit(make_job(*engine, "hello", queued, 5)));
  REQUIRE(started.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  engine->stop();
  REQUIRE(wait(running));
  REQUIRE(wait(queued));
  CHECK(!running.error);
  CHECK(running.stats.finish == FinishReason::Cancelled);
  CHECK(running.stats.generated_tokens < 200);
  REQUIRE(queued.error);
  try {
    std::rethrow_exception(queued.error);
  } catch (const std::exception& e) {
    CHECK(std::string(e.what()) == "the server is shutting down");
  }
  CHECK(queued.stats.finish == FinishReason::Cancelled);
  Outcome late;
  CHECK(!engine->try_submit(make_job(*engine, "x", late)));
  engine->stop();  // idempotent
}

TEST_CASE("engine: prefix reuse gives the same greedy text as a fresh context") {
  const std::vector<std::string> prompts = {"the quick brown fox jumps", "the quick brown fox sleeps",
                                            "the quick brown fox jumps", "hello there",
                                            "the quick brown fox jumps over"};
  auto run_all = [&](bool reuse, EngineMetrics& m) {
    auto engine = make_engine(2, reuse, 4);
    std::vector<std::string> texts;
    for (const auto& p : prompts) {
      Outcome o;
      REQUIRE(engine->try_submit(make_job(*engine, p, o, 10, 0.0f)));
      REQUIRE(wait(o));
      CHECK(!o.error);
      texts.push_back(o.text);
    }
    m = engine->metrics();
    return texts;
  };
  EngineMetrics with, without;
  const auto reused = run_all(true, with);
  const auto fresh = run_all(false, without);
  CHECK(reused == fresh);
  CHECK(without.reused_prompt_tokens == 0);
  CHECK(without.prefill_tokens == without.prompt_tokens);
  CHECK(with.reused_prompt_tokens > 10);
  CHECK(with.prefill_tokens + with.reused_prompt_tokens == with.prompt_tokens);
  CHECK(with.prompt_tokens == without.prompt_tokens);
}

TEST_CASE("engine: a repeated prompt reuses all but its last token") {
  auto engine = make_engine(1);
  Outcome a, b;
  GenerationJob ja = make_job(*engine, "numbers one two three", a, 4, 0.0f);
  const auto n = static_cast<uint64_t>(ja.prompt.size());
  REQUIRE(engine->try_submit(std::move(ja)));
  REQUIRE(wait(a));
  REQUIRE(engine->try_submit(make_job(*engine, "numbers one two three", b, 4, 0.0f)));
  REQUIRE(wait(b));
  CHECK(a.text == b.text);
  CHECK(b.stats.cached_prompt_tokens == static_cast<int64_t>(n - 1));
  CHECK(engine->metrics().reused_prompt_tokens == n - 1);
  CHECK(engine->metrics().prefill_tokens == n + 1);
}

TEST_CASE("engine: stop sequences end the job with the text before them") {
  auto engine = make_engine(1);
  Outcome full;
  REQUIRE(engine->try_submit(make_job(*engine, "the quick brown fox", full, 24, 0.0f)));
  REQUIRE(wait(full));
  REQUIRE(full.text.size() > 12);
  const std::string stop = full.text.substr(6, 5);
  Outcome stopped;
  GenerationJob job = make_job(*engine, "the quick brown fox", stopped, 24, 0.0f);
  job.stop = {"\x01never", stop};
  REQUIRE(engine->try_submit(std::move(job)));
  REQUIRE(wait(stopped));
  CHECK(stopped.stats.finish == FinishReason::StopSequence);
  CHECK(stopped.text == full.text.substr(0, full.text.find(stop)));
  for (const auto& piece : stopped.pieces) CHECK(piece.find(stop) == std::string::npos);
  CHECK(engine->metrics().jobs_completed == 2);
}

TEST_CASE("engine: penalties and logit bias reach the sampler") {
  auto engine = make_engine(1);
  const Tokenizer& tok = engine->model().tokenizer();
  std::vector<int32_t> prompt = tok.encode("the quick brown fox", true, false);
  // The greedy next token, computed here; then put it into the prompt's history (before the last
  // token, which mostly decides the next one), where penalties can see it.
  int32_t next = -1;
  {
    ThreadPool pool(1);
    InferenceContext ctx(engine->model(), pool, {});
    SamplingParams greedy;
    greedy.temperature = 0;
    Sampler sampler(greedy, tok.n_vocab());
    GenerationLimits limits;
    limits.max_tokens = 1;
    generate(ctx, sampler, prompt, limits, [&](int32_t id, std::string_view) {
      if (id >= 0) next = id;
      return true;
    });
  }
  REQUIRE(next >= 0);
  prompt.insert(prompt.begin() + 1, 8, next);
  auto greedy_ids = [&](const SamplingParams& sp, int64_t n) {
    Outcome o;
    GenerationJob job = make_job(*engine, "", o, n, 0.0f);
    job.prompt = prompt;
    job.sampling = sp;
    job.sampling.temperature = 0.0f;
    REQUIRE(engine->try_submit(std::move(job)));
    REQUIRE(wait(o));
    CHECK(!o.error);
    return o.text;
  };
  const std::string plain = greedy_ids({}, 16);
  SamplingParams penal;
  penal.repeat_penalty = 10.0f;
  penal.frequency_penalty = 2.0f;
  penal.presence_penalty = 2.0f;
  CHECK(greedy_ids(penal, 16) != plain);
  SamplingParams freq;  // OpenAI's penalty alone: 8 occurrences x 2
  freq.frequency_penalty = 2.0f;
  CHECK(greedy_ids(freq, 16) != plain);
  // Banning the greedy next token changes the text.
  SamplingParams ban;
  ban.logit_bias = {{next, -INFINITY}};
  CHECK(greedy_ids(ban, 16) != plain);
}

TEST_CASE("engine: metrics count prompts, tokens, time and failures") {
  auto engine = make_engine(2);
  EngineMetrics m0 = engine->metrics();
  CHECK(m0.slots == 2);
  CHECK(m0.kv_cache_bytes > 0);
  CHECK(m0.model_bytes > 0);
  CHECK(m0.jobs_completed == 0);
  Outcome o;
  GenerationJob job = make_job(*engine, "the quick brown fox", o, 8, 0.0f);
  const auto n = static_cast<uint64_t>(job.prompt.size());
  std::atomic<bool> polling{true};
  std::thread reader([&] {  // metrics() is safe to call while the engine runs
    while (polling) (void)engine->metrics();
  });
  REQUIRE(engine->try_submit(std::move(job)));
  REQUIRE(wait(o));
  polling = false;
  reader.join();
  EngineMetrics m = engine->metrics();
  CHECK(m.prompt_tokens == n);
  CHECK(m.prefill_tokens == n);
  CHECK(m.generated_tokens == static_cast<uint64_t>(o.stats.generated_tokens));
  CHECK(m.prefill_seconds > 0);
  CHECK(m.decode_seconds > 0);
  CHECK(m.jobs_completed == 1);
  CHECK(m.jobs_failed == 0);
  CHECK(m.kv_cache_bytes == m0.kv_cache_bytes);

  // A job the engine cannot run (a token outside the vocabulary) fails alone.
  Outcome bad;
  GenerationJob broken = make_job(*engine, "x", bad, 4);
  broken.prompt = {1, 1 << 30};
  REQUIRE(engine->try_submit(std::move(broken)));
  REQUIRE(wait(bad));
  CHECK(bad.error);
  CHECK(engine->metrics().jobs_failed == 1);
  // And one that does not fit the context.
  Outcome big;
  REQUIRE(engine->try_submit(make_job(*engine, "x", big, 1000)));
  REQUIRE(wait(big));
  CHECK(big.error);
  CHECK(engine->metrics().jobs_failed == 2);
  Outcome ok;
  REQUIRE(engine->try_submit(make_job(*engine, "x", ok, 3)));
  REQUIRE(wait(ok));
  CHECK(!ok.error);
}

// logit_bias -100 (-inf) on every token: nothing may be emitted, so the job ends at once with
// finish_reason "stop" (EndOfGeneration) and no token, never token 0 (which it emitted before).
TEST_CASE("engine: a job that bans every token ends with no token and FinishReason::EndOfGeneration") {
  auto engine = make_engine(1);
  const auto n_vocab = static_cast<int32_t>(engine->model().config().n_vocab);
  for (float temperature : {0.0f, 0.9f}) {
    INFO("temperature ", temperature);
    Outcome o;
    GenerationJob job = make_job(*engine, "the quick brown fox", o, 8, temperature);
    job.on_text = [&o](std::string_view t) { o.text += t; };
    for (int32_t id = 0; id < n_vocab; ++id) job.sampling.logit_bias.emplace_back(id, -INFINITY);
    REQUIRE(engine->try_submit(std::move(job)));
    REQUIRE(wait(o));
    CHECK(!o.error);
    CHECK(o.stats.generated_tokens == 0);
    CHECK(o.stats.finish == FinishReason::EndOfGeneration);
    CHECK(o.text.empty());
  }
  // The slot is fine afterwards.
  Outcome ok;
  REQUIRE(engine->try_submit(make_job(*engine, "x", ok, 3, 0.0f)));
  REQUIRE(wait(ok));
  CHECK(!ok.error);
  CHECK(ok.stats.generated_tokens == 3);
}

namespace {

// A copy of the tiny dReLU model's pack (untied head: token embeddings are read from the pack too),
// which the test may truncate and restore.
struct PackCopy {
  PackCopy() {
    static const std::string original = [] {
      pack::PackOptions p;
      p.source_path = test_server::drelu_predictor_model_path();
      p.output_path = (test_server::test_dir() / "engine-pack.gguf").string();
      pack::write_pack(p);
      return p.output_path;
    }();
    path = (test_server::test_dir() / ("engine-pack-copy-" + std::to_string(++copies) + ".gguf")).string();
    std::filesystem::copy_file(original, path, std::filesystem::copy_options::overwrite_existing);
    std::ifstream in(path, std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  ~PackCopy() { std::filesystem::remove(path); }
  void truncate(uint64_t bytes) const { std::filesystem::resize_file(path, bytes); }
  void restore() const {  // in place: the daemon's open descriptors see the bytes again
    std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
    out.write(reinterpret_cast<const char*>(whole.data()), static_cast<std::streamsize>(whole.size()));
  }
  static inline int copies = 0;
  std::string path;
  std::vector<char> whole;
};

}  // namespace

// A past crash: under a memory budget the pack is truncated while the engine serves. The
// prompt's embeddings are read on the pool's threads (2 here); a failed read there used to be
// std::terminate. Now the job fails with cache::FetchError (the daemon's 500 model_read_failed),
// the next job fails the same way, and once the file is whole again the engine answers as before:
// the failed jobs' slot was reset, nothing half-written is reused.
TEST_CASE("engine: a pack truncated while it is served fails each job with FetchError; the engine lives on") {
  const PackCopy pack;
  const uint64_t minimum = test_server::minimum_budget(pack.path);
  REQUIRE(minimum > 0);
  ModelLoadOptions lo;
  lo.offload.budget_bytes = minimum + 200 * 1024;
  lo.offload.backend = io::IoBackend::Pread;
  EngineOptions eo;
  eo.threads = 2;
  eo.context.n_ctx = 256;
  eo.context.sparse.mode = SparseOptions::Mode::Predictor;
  eo.slots = 1;
  eo.log = [](const std::string&) {};
  // The failed jobs' outcomes outlive the engine (declared before it, so destroyed after its thread
  // is joined): the last reference to each error is then dropped here, not by the engine thread's
  // catch block. Either is correct C++, but the exception's reference count lives in libstdc++.so,
  // which ThreadSanitizer cannot see, so a free on the engine thread after our e.what() would be
  // reported as a race (scripts/ci-tsan.sh).
  std::vector<std::unique_ptr<Outcome>> failed;
  EngineWorker engine(Model::load(pack.path, lo), eo);
  REQUIRE(engine.model().weights().token_embd.data == nullptr);
  const std::string prompt = "the quick brown fox jumps over the lazy dog";
  auto run = [&] {
    auto o = std::make_unique<Outcome>();
    REQUIRE(engine.try_submit(make_job(engine, prompt, *o, 8, 0.0f)));
    REQUIRE(wait(*o));
    return o;
  };
  const std::string want = run()->text;
  REQUIRE(!want.empty());

  pack.truncate(20000);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto& o = failed.emplace_back(run());
    REQUIRE(o->error);
    CHECK_THROWS_AS(std::rethrow_exception(o->error), cache::FetchError);
    try {
      std::rethrow_exception(o->error);
    } catch (const std::exception& e) {
      CHECK(std::string(e.what()).find(pack.path) != std::string::npos);
    }
  }
  CHECK(engine.metrics().jobs_failed == 2);
  pack.restore();
  CHECK(run()->text == want);
  CHECK(run()->text == want);
  engine.model().offloaded_ffn()->check_consistency();
}

TEST_CASE("engine: slots outside [1, kMaxSlots] are rejected") {
  EngineOptions eo;
  eo.threads = 1;
  eo.context.n_ctx = 64;
  eo.slots = 0;
  CHECK_THROWS_AS(EngineWorker(Model::load(engine_model_path()), eo), std::invalid_argument);
}

}  // namespace ember::server
