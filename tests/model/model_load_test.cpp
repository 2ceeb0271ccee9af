// Model files are hostile input: every defect gives one clear error naming the problem.
#include <doctest/doctest.h>

#include <unistd.h>

#include <string>

#include "core/model/generator.h"
#include "tests/model/tiny_model_builder.h"

namespace ember {
namespace {

std::string load_error(const test::TinyModelSpec& spec, const std::string& name) {
  const auto path = test::write_tiny_model(spec, name);
  std::string message;
  try {
    Model::load(path.string());
  } catch (const std::exception& e) {
    message = e.what();
  }
  std::filesystem::remove(path);
  return message;
}

}  // namespace

TEST_CASE("a valid tiny model loads and generates deterministically") {
  const auto path = test::write_tiny_model({}, "tiny-valid");
  auto model = Model::load(path.string());
  ThreadPool pool(2);
  std::vector<int32_t> first;
  for (int rep = 0; rep < 2; ++rep) {
    InferenceContext ctx(*model, pool, {});
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    Sampler sampler(greedy, 300);
    std::vector<int32_t> got;
    GenerationLimits limits;
    limits.max_tokens = 10;
    limits.stop_at_end_of_generation = false;
    const std::vector<int32_t> prompt = {1, 270, 280, 290};
    generate(ctx, sampler, prompt, limits, [&](int32_t id, std::string_view) {
      if (id >= 0) got.push_back(id);
      return true;
    });
    CHECK(got.size() == 10);
    if (rep == 0) first = got;
    else CHECK(got == first);
  }
  std::filesystem::remove(path);
}

TEST_CASE("batched prefill and token-by-token evaluation give the same logits") {
  const auto path = test::write_tiny_model({}, "tiny-batch");
  auto model = Model::load(path.string());
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = {1, 270, 280, 290, 271, 299, 265};
  InferenceContext batched(*model, pool, {});
  const float* a = batched.eval(prompt);
  std::vector<float> la(a, a + 300);
  ContextOptions one_by_one;
  one_by_one.max_batch = 1;
  InferenceContext single(*model, pool, one_by_one);
  const float* b = single.eval(prompt);
  for (int i = 0; i < 300; ++i) CHECK(b[i] == doctest::Approx(la[static_cast<size_t>(i)]).epsilon(1e-4));
  std::filesystem::remove(path);
}

TEST_CASE("context overflow and bad token ids are clear errors that evaluate nothing") {
  const auto path = test::write_tiny_model({}, "tiny-ctx");
  auto model = Model::load(path.string());
  ThreadPool pool(1);
  ContextOptions small;
  small.n_ctx = 8;
  InferenceContext ctx(*model, pool, small);
  std::vector<int32_t> nine(9, 270);
  CHECK_THROWS_AS(ctx.eval(nine), ContextOverflow);
  CHECK(ctx.n_past() == 0);
  std::vector<int32_t> bad = {1, 300};
  CHECK_THROWS_AS(ctx.eval(bad), std::out_of_range);
  CHECK(ctx.n_past() == 0);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  Sampler sampler(greedy, 300);
  GenerationLimits limits;
  limits.max_tokens = 5;
  std::vector<int32_t> four(4, 270);
  CHECK_THROWS_AS(generate(ctx, sampler, four, limits, [](int32_t, std::string_view) { return true; }), ContextOverflow);
  std::filesystem::remove(path);
}

TEST_CASE("a missing tensor is named") {
  test::TinyModelSpec s;
  s.skip_tensor = "blk.1.ffn_up.weight";
  CHECK(load_error(s, "tiny-missing").find("'blk.1.ffn_up.weight' is missing") != std::string::npos);
}

TEST_CASE("a wrong shape gives expected vs actual") {
  test::TinyModelSpec s;
  s.misshape_tensor = "blk.0.attn_k.weight";
  const std::string e = load_error(s, "tiny-shape");
  CHECK(e.find("blk.0.attn_k.weight") != std::string::npos);
  CHECK(e.find("{32, 17}") != std::string::npos);
  CHECK(e.find("expected {32, 16}") != std::string::npos);
}

TEST_CASE("an absurd block_count is rejected before anything is allocated") {
  test::TinyModelSpec s;
  s.block_count_override = 1ull << 40;
  CHECK(load_error(s, "tiny-blocks").find("llama.block_count") != std::string::npos);
}

TEST_CASE("an unknown architecture is rejected by name") {
  // The builder always writes llama; check the config reader directly.
  gguf::Metadata md;
  gguf::Value v;
  v.type = gguf::ValueType::STRING;
  v.data = std::string("mamba");
  md.add("general.architecture", v);
  CHECK_THROWS_WITH_AS(read_model_config(md), doctest::Contains("'mamba' is not supported"), std::runtime_error);
}

}  // namespace ember

namespace ember {

// ModelLoadOptions::checkpoint runs between the load's stages and before every tensor, so that a
// daemon told to stop (SIGTERM) while a big model loads can abandon the load instead of waiting
// for it to end; what it throws comes out of Model::load unchanged.
TEST_CASE("a load checkpoint runs before every tensor and can abandon the load") {
  const auto path = test::write_tiny_model({}, "tiny-checkpoint");
  ModelLoadOptions counting;
  int calls = 0;
  counting.checkpoint = [&calls] { ++calls; };
  auto model = Model::load(path.string(), counting);
  const int64_t n_tensors = static_cast<int64_t>(model->file().tensors().size());
  CHECK(calls >= n_tensors);

  for (int stop_at : {1, 2, 3, calls / 2, calls}) {
    INFO("abandoned at checkpoint ", stop_at);
    ModelLoadOptions o;
    int seen = 0;
    o.checkpoint = [&seen, stop_at] {
      if (++seen == stop_at) throw LoadCancelled("stop");
    };
    CHECK_THROWS_AS(Model::load(path.string(), o), LoadCancelled);
    CHECK(seen == stop_at);  // nothing after the throw
  }
  std::filesystem::remove(path);
}

}  // namespace ember
