// A pack run under a memory budget: the FFN bundles read on demand through the neuron
// cache give the same floats as the all-in-RAM pack at every budget and with both I/O backends,
// and an I/O error fails the step that hit it while the cache stays usable.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/cache/budget_planner.h"
#include "core/cache/fetch_error.h"
#include "core/model/model.h"
#include "core/synth/synth_writer.h"
#include "io/fault_injecting_reader.h"
#include "io/io_backend.h"
#include "io/uring_reader.h"
#include "tests/pack/pack_support.h"
#include "tests/sparse/sparse_support.h"

namespace ember {
namespace {

// A tiny TurboSparse-like model (drelu, Q4_0, predictor) and its hottest-first pack, made once.
struct TinyPack {
  TinyPack() {
    src = test::tiny_turbosparse_synth("budget-src").output_path;
    pk = test::make_pack(src, "budget-pack", {});
  }
  ~TinyPack() {
    std::filesystem::remove(src);
    std::filesystem::remove(pk);
  }
  std::filesystem::path src, pk;
};

const TinyPack& tiny_pack() {
  static const TinyPack p;
  return p;
}

uint64_t minimum_budget(const std::string& path) {
  ModelLoadOptions o;
  o.offload.budget_bytes = 1;
  try {
    Model::load(path, o);
  } catch (const cache::BudgetTooSmall& e) {
    return e.minimum_bytes();
  }
  FAIL("a 1-byte budget was accepted");
  return 0;
}

bool uring_works() { return io::UringReader::unavailable_reason().empty(); }

std::unique_ptr<Model> load_with_budget(const std::string& path, uint64_t budget, io::IoBackend backend,
                                        uint32_t stream_chunk_bytes = OffloadOptions{}.stream_chunk_bytes,
                                        bool prefetch = false) {
  ModelLoadOptions o;
  o.offload.prefetch = prefetch;
  o.offload.budget_bytes = budget;
  o.offload.backend = backend;
  o.offload.stream_chunk_bytes = stream_chunk_bytes;
  return Model::load(path, o);
}

bool same_floats(const test::GreedyRun& a, const test::GreedyRun& b) {
  return a.tokens == b.tokens && a.logits == b.logits;
}

}  // namespace

TEST_CASE("a pack under a memory budget gives the all-in-RAM floats at every budget, with both backends") {
  const TinyPack& tp = tiny_pack();
  const std::string path = tp.pk.string();
  const uint64_t file_bytes = std::filesystem::file_size(tp.pk);
  const uint64_t minimum = minimum_budget(path);
  MESSAGE("tiny drelu Q4_0 pack: ", file_bytes, " bytes, minimum budget ", minimum, " (",
          100.0 * static_cast<double>(minimum) / static_cast<double>(file_bytes), "% of the file)");
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = {1, 50, 60, 70, 80, 90};  // a dense (streamed) prefill first

  auto in_ram = Model::load(path);
  SparseOptions predictor;
  predictor.mode = SparseOptions::Mode::Predictor;
  for (const SparseOptions& mode : {predictor, SparseOptions{}}) {
    const std::string mode_name(sparse_mode_name(mode.mode));
    const test::GreedyRun want = test::greedy_run(*in_ram, pool, mode, prompt, 24);
    std::vector<io::IoBackend> backends = {io::IoBackend::Pread};
    if (uring_works()) backends.push_back(io::IoBackend::Uring);
    else MESSAGE("SKIPPED: io_uring does not work here; only the pread backend is tested");
    for (io::IoBackend backend : backends) {
      for (uint64_t budget : {file_bytes, std::max(file_bytes / 2, minimum), minimum}) {
        CAPTURE(mode_name);
        CAPTURE(io::io_backend_name(backend));
        CAPTURE(budget);
        auto model = load_with_budget(path, budget, backend);
        REQUIRE(model->offloaded_ffn() != nullptr);
        CHECK(model->weights().token_embd.data == nullptr);  // untied head: embeddings read on demand
        CHECK(model->offloaded_ffn()->plan().total_bytes <= budget);
        const test::GreedyRun got = test::greedy_run(*model, pool, mode, prompt, 24);
        CHECK(same_floats(got, want));
        // Twice in a row: the second run starts from a warm cache and must not differ.
        CHECK(same_floats(test::greedy_run(*model, pool, mode, prompt, 24), want));
        const OffloadStats st = model->offloaded_ffn()->stats();
        CHECK(st.dense_steps > 0);
        if (mode.mode == SparseOptions::Mode::Predictor) CHECK(st.sparse_steps > 0);
        if (budget == minimum && mode.mode == SparseOptions::Mode::Predictor) CHECK(st.fetch.bytes_read > 0);
        model->offloaded_ffn()->check_consistency();
        // Streamed dense steps in the smallest chunks (64 neurons): the hot ones computed in place
        // in one go, the rest chunk by chunk, still the same floats.
        auto chunked = load_with_budget(path, budget, backend, 1);
        CHECK(same_floats(test::greedy_run(*chunked, pool, mode, prompt, 24), want));
        if (mode.mode == SparseOptions::Mode::Predictor && budget < file_bytes) {
          // Reading each layer's predicted bundles ahead changes what is cached, never the floats.
          auto ahead = load_with_budget(path, budget, backend, OffloadOptions{}.stream_chunk_bytes, /*prefetch=*/true);
          CHECK(same_floats(test::greedy_run(*ahead, pool, mode, prompt, 24), want));
          const OffloadStats pst = ahead->offloaded_ffn()->stats();
          if (budget == minimum) CHECK(pst.fetch.prefetched_bundles > 0);
          CHECK(pst.fetch.prefetched_used <= pst.fetch.prefetched_bundles);
          ahead->offloaded_ffn()->check_consistency();
        }
      }
    }
  }
}

TEST_CASE("a memory budget is refused clearly where it cannot work") {
  const TinyPack& tp = tiny_pack();
  ModelLoadOptions o;
  o.offload.budget_bytes = 1;
  CHECK_THROWS_WITH_AS(Model::load(tp.pk.string(), o), doctest::Contains("is too small: the minimum is"),
                       cache::BudgetTooSmall);
  o.offload.budget_bytes = 1ull << 40;
  CHECK_THROWS_WITH(Model::load(tp.src.string(), o), doctest::Contains("needs a neuron-bundle pack"));
  auto model = load_with_budget(tp.pk.string(), 1ull << 40, io::IoBackend::Pread);
  ThreadPool pool(1);
  ContextOptions c;
  c.sparse.mode = SparseOptions::Mode::Oracle;
  CHECK_THROWS_WITH(InferenceContext(*model, pool, c), doctest::Contains("use the predictor mode or dense"));
  c.sparse.mode = SparseOptions::Mode::Predictor;
  c.sparse.diagnostics = true;
  CHECK_THROWS_WITH(InferenceContext(*model, pool, c), doctest::Contains("no memory budget"));
}

TEST_CASE("an I/O error under a memory budget fails that step; the cache stays consistent and the next step works") {
  const TinyPack& tp = tiny_pack();
  const std::string path = tp.pk.string();
  io::FaultInjectingReader* faults = nullptr;
  ModelLoadOptions o;
  o.offload.budget_bytes = minimum_budget(path);
  o.offload.backend = io::IoBackend::Pread;
  o.offload.wrap_reader = [&](std::unique_ptr<io::BatchReader> inner) {
    auto f = std::make_unique<io::FaultInjectingReader>(std::move(inner));
    faults = f.get();
    return std::unique_ptr<io::BatchReader>(std::move(f));
  };
  auto model = Model::load(path, o);
  REQUIRE(faults != nullptr);
  ThreadPool pool(2);
  SparseOptions predictor;
  predictor.mode = SparseOptions::Mode::Predictor;
  const std::vector<int32_t> prompt = {1, 50, 60, 70};
  const test::GreedyRun want = test::greedy_run(*model, pool, predictor, prompt, 16);

  ContextOptions co;
  co.n_ctx = 256;
  co.sparse = predictor;
  InferenceContext ctx(*model, pool, co);
  // Every read fails: the streamed prefill throws, naming the file.
  io::FaultPlan bad;
  bad.range_begin = 0;
  bad.range_end = ~0ull;
  faults->set_plan(bad);
  CHECK_THROWS_WITH_AS(ctx.eval(prompt), doctest::Contains(path.c_str()), cache::FetchError);
  model->offloaded_ffn()->check_consistency();
  CHECK(ctx.n_past() == 0);
  // A decode step whose misses fail: prefill with working reads, then every read fails.
  faults->set_plan({});
  const float* logits = ctx.eval(prompt);
  const int32_t first = test::argmax(logits, model->config().n_vocab);
  CHECK(first == want.tokens[0]);
  model->offloaded_ffn()->reset_stats();
  faults->set_plan(bad);
  bool failed = false;
  int32_t next = first;
  // Cold misses happen at the minimum budget within a few tokens.
  for (int i = 0; i < 16 && !failed; ++i) {
    try {
      logits = ctx.eval(std::vector<int32_t>{next});
      next = test::argmax(logits, model->config().n_vocab);
    } catch (const cache::FetchError& e) {
      failed = true;
      CHECK(std::string(e.what()).find(path) != std::string::npos);
    }
  }
  CHECK(failed);
  model->offloaded_ffn()->check_consistency();
  // Reads work again: the same context and a fresh one continue correctly.
  faults->set_plan({});
  ctx.reset();
  const test::GreedyRun again = test::greedy_run(*model, pool, predictor, prompt, 16);
  CHECK(same_floats(again, want));
  model->offloaded_ffn()->check_consistency();
}

// The pack shrinks while it is served (truncated to 20,000 bytes, as an operator's mistake or a
// failing file system would): every read past the new end fails. The prompt's embeddings are read
// on the pool's threads (the untied head leaves the table on storage), so before the fix the
// failure in a pool task was std::terminate (or a SIGSEGV: the caller unwound while the workers
// still ran its tasks). Now each step fails with a FetchError naming the file, and once the file
// is whole again the same model and context answer as before.
TEST_CASE("a pack truncated while it is served: steps fail with FetchError, and work again once it is whole") {
  const TinyPack& tp = tiny_pack();
  const std::filesystem::path copy = test::temp_path("budget-truncated");
  std::filesystem::copy_file(tp.pk, copy, std::filesystem::copy_options::overwrite_existing);
  struct Remove {
    std::filesystem::path p;
    ~Remove() { std::filesystem::remove(p); }
  } remove{copy};
  const std::vector<uint8_t> whole = test::read_file_bytes(copy);
  const std::string path = copy.string();
  for (io::IoBackend backend : {io::IoBackend::Pread, io::IoBackend::Auto}) {
    INFO("backend ", io::io_backend_name(backend));
    auto model = load_with_budget(path, minimum_budget(path), backend, OffloadOptions{}.stream_chunk_bytes,
                                  /*prefetch=*/true);
    REQUIRE(model->weights().token_embd.data == nullptr);  // embeddings are read from the pack
    ThreadPool pool(4);
    SparseOptions predictor;
    predictor.mode = SparseOptions::Mode::Predictor;
    const std::vector<int32_t> prompt = {1, 50, 60, 70, 80, 90, 100, 110};
    const test::GreedyRun want = test::greedy_run(*model, pool, predictor, prompt, 8);

    ContextOptions co;
    co.n_ctx = 256;
    co.sparse = predictor;
    InferenceContext ctx(*model, pool, co);
    std::filesystem::resize_file(copy, 20000);
    for (int attempt = 0; attempt < 3; ++attempt) {
      CHECK_THROWS_WITH_AS(ctx.eval(prompt), doctest::Contains(path.c_str()), cache::FetchError);
      CHECK(ctx.n_past() == 0);
      model->offloaded_ffn()->check_consistency();
    }
    // A decode step (one token, embedded on the caller's thread) fails the same way.
    CHECK_THROWS_AS(ctx.eval(std::vector<int32_t>{5}), cache::FetchError);
    model->offloaded_ffn()->check_consistency();
    // The pool itself is fine: the whole pack back in place, the same answers.
    test::write_file_bytes(copy, whole);
    ctx.reset();
    const float* logits = ctx.eval(prompt);
    CHECK(test::argmax(logits, model->config().n_vocab) == want.tokens[0]);
    CHECK(same_floats(test::greedy_run(*model, pool, predictor, prompt, 8), want));
  }
}

TEST_CASE("re-planning from live activations keeps the results and the budget") {
  const TinyPack& tp = tiny_pack();
  const std::string path = tp.pk.string();
  const uint64_t budget = std::max(std::filesystem::file_size(tp.pk) / 2, minimum_budget(path));
  auto model = load_with_budget(path, budget, io::IoBackend::Pread);
  ThreadPool pool(2);
  SparseOptions predictor;
  predictor.mode = SparseOptions::Mode::Predictor;
  const std::vector<int32_t> prompt = {1, 50, 60, 70};
  const test::GreedyRun want = test::greedy_run(*model, pool, predictor, prompt, 24);
  OffloadedFfn& off = *model->offloaded_ffn();
  off.replan();  // the pack has no profile: live counts now say which neurons are hot
  CHECK(off.plan().total_bytes <= budget);
  off.check_consistency();
  CHECK(same_floats(test::greedy_run(*model, pool, predictor, prompt, 24), want));

  // Saved counts reload into another instance of the same pack, and are refused by another pack.
  const std::string state = test::temp_path("budget-activations").string();
  off.save_activations(state);
  auto other = load_with_budget(path, budget, io::IoBackend::Pread);
  other->offloaded_ffn()->load_activations(state);
  other->offloaded_ffn()->replan();
  CHECK(other->offloaded_ffn()->plan().hot == off.plan().hot);
  const auto rev = test::make_pack(tp.src, "budget-pack-rev", test::reversed_orders(model->config().n_layer, model->config().n_ff));
  auto foreign = load_with_budget(rev.string(), budget, io::IoBackend::Pread);
  CHECK_THROWS(foreign->offloaded_ffn()->load_activations(state));
  std::filesystem::remove(state);
  std::filesystem::remove(rev);
}

}  // namespace ember
