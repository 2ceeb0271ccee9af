// `ember serve`'s sparse-FFN settings: the "sparse" config section (file, EMBER_* variables,
// errors, conflicts), the engine running a sparse mode on a synthetic dReLU model with
// predictors, and the ember_sparse_* metrics; a mixture of experts and its ember_moe_* metrics.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <future>
#include <map>
#include <string>

#include "server/engine_worker.h"
#include "server/http_metrics.h"
#include "server/serve_config.h"
#include "tests/server/config_test_support.h"
#include "core/synth/synth_writer.h"
#include "tests/server/tiny_model.h"

namespace ember::server {
namespace {

using nlohmann::json;

using ember::server::test::contains;
using ember::server::test::Env;
using ember::server::test::error_of;

ServeConfig from_json(const char* text) {
  ServeConfig c;
  apply_config_json(c, json::parse(text), "test");
  return c;
}

using test_server::drelu_predictor_model_path;

// Runs one greedy completion to its end; returns the error message ("" on success).
std::string complete(EngineWorker& engine, const std::string& prompt, int64_t max_tokens) {
  std::promise<std::string> done;
  GenerationJob job;
  job.prompt = engine.model().tokenizer().encode(prompt, true, false);
  job.sampling.temperature = 0.0f;
  job.max_tokens = max_tokens;
  job.on_text = [](std::string_view) {};
  job.on_done = [&done](const GenerationStats&, std::exception_ptr e) {
    std::string message;
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        message = x.what();
      }
    }
    done.set_value(message);
  };
  REQUIRE(engine.try_submit(std::move(job)));
  return done.get_future().get();
}

}  // namespace

TEST_CASE("sparse section: defaults, file keys, null threshold") {
  const ServeConfig d;
  const auto j = to_json(d);
  CHECK(j["sparse"]["mode"] == "dense");
  CHECK(j["sparse"]["threshold"].is_null());
  CHECK(j["sparse"]["sparsity"] == 0.0);
  CHECK(j["sparse"]["profile"] == "");
  CHECK(j["sparse"]["stats"] == false);
  CHECK(sparse_options(d).mode == SparseOptions::Mode::Dense);

  ServeConfig c = from_json(R"({"sparse":{"mode":"predictor","threshold":0.25,"stats":true}})");
  CHECK(c.sparse_mode == "predictor");
  CHECK(c.sparse_threshold == 0.25);
  CHECK(c.sparse_stats);
  SparseOptions o = sparse_options(c);
  CHECK(o.mode == SparseOptions::Mode::Predictor);
  CHECK(o.threshold_override == 0.25f);
  CHECK(o.diagnostics);
  // null restores the model's own threshold; an integer is a number too.
  apply_config_json(c, json::parse(R"({"sparse":{"threshold":null}})"), "test");
  CHECK(std::isnan(c.sparse_threshold));
  CHECK(to_json(c)["sparse"]["threshold"].is_null());
  apply_config_json(c, json::parse(R"({"sparse":{"threshold":1}})"), "test");
  CHECK(c.sparse_threshold == 1.0);

  // A sparsity implies the threshold mode; 0 is off.
  c = from_json(R"({"sparse":{"sparsity":0.5}})");
  o = sparse_options(c);
  CHECK(o.mode == SparseOptions::Mode::Threshold);
  CHECK(o.target_sparsity == 0.5f);
  c = from_json(R"({"sparse":{"sparsity":0}})");
  CHECK(sparse_options(c).mode == SparseOptions::Mode::Dense);

  // to_json round-trips.
  c = from_json(R"({"sparse":{"mode":"threshold","sparsity":0.3,"profile":"/x.profile"}})");
  ServeConfig back;
  apply_config_json(back, json::parse(to_json(c).dump()), "round trip");
  CHECK(to_json(back) == to_json(c));
}

TEST_CASE("sparse section: bad values name the key and the allowed values") {
  std::string e = error_of([] { from_json(R"({"sparse":{"mode":"sparse"}})"); });
  CHECK(contains(e, "sparse.mode"));
  CHECK(contains(e, "dense, oracle, predictor, threshold"));
  CHECK(contains(e, "\"sparse\""));
  e = error_of([] { from_json(R"({"sparse":{"mode":1}})"); });
  CHECK(contains(e, "sparse.mode must be a string"));
  e = error_of([] { from_json(R"({"sparse":{"sparsity":1.0}})"); });
  CHECK(contains(e, "sparse.sparsity must be from 0"));
  e = error_of([] { from_json(R"({"sparse":{"sparsity":-0.1}})"); });
  CHECK(contains(e, "sparse.sparsity"));
  e = error_of([] { from_json(R"({"sparse":{"threshold":"high"}})"); });
  CHECK(contains(e, "sparse.threshold must be a number"));
  e = error_of([] { from_json(R"({"sparse":{"stats":"yes"}})"); });
  CHECK(contains(e, "sparse.stats must be true or false"));
  e = error_of([] { from_json(R"({"sparse":{"modes":"dense"}})"); });
  CHECK(contains(e, "unknown key \"sparse.modes\""));
  e = error_of([] { from_json(R"({"model":{"sparsity":0.5}})"); });
  CHECK(contains(e, "did you mean \"sparse.sparsity\""));
}

TEST_CASE("sparse section: conflicting settings fail check_config like `ember run`'s flags") {
  auto check_error = [](const char* text, const char* key, const char* part) {
    INFO(text);
    const ServeConfig c = from_json(text);
    const std::string e = error_of([&] { check_config(c); });
    CHECK(contains(e, key));
    CHECK(contains(e, part));
  };
  check_error(R"({"sparse":{"mode":"predictor","sparsity":0.5}})", "sparse.sparsity",
              "cannot go with sparse.mode predictor");
  check_error(R"({"sparse":{"mode":"oracle","sparsity":0.5}})", "sparse.sparsity", "threshold-mode");
  check_error(R"({"sparse":{"profile":"/some.profile"}})", "sparse.profile", "give sparse.sparsity too");
  check_error(R"({"sparse":{"profile":"/some.profile","sparsity":0.5,"threshold":0.1}})", "sparse.profile",
              "cannot go with sparse.threshold");
  // Fine combinations.
  CHECK_NOTHROW(check_config(from_json(R"({"sparse":{"mode":"threshold","sparsity":0.5}})")));
  CHECK_NOTHROW(check_config(from_json(R"({"sparse":{"mode":"threshold","threshold":0.05}})")));
  CHECK_NOTHROW(check_config(from_json(R"({"sparse":{"sparsity":0.5,"profile":"/some.profile"}})")));
}

TEST_CASE("sparse section: EMBER_* variables") {
  Env env;
  env.vars = {{"EMBER_SPARSE", "predictor"},
              {"EMBER_SPARSE_THRESHOLD", " -0.5 "},
              {"EMBER_SPARSE_STATS", "on"},
              {"EMBER_SPARSE_PROFILE", "/p.profile"}};
  ServeConfig c;
  apply_environment(c, env.fn());
  CHECK(c.sparse_mode == "predictor");
  CHECK(c.sparse_threshold == -0.5);
  CHECK(c.sparse_stats);
  CHECK(c.sparse_profile == "/p.profile");

  env.vars = {{"EMBER_SPARSITY", "0.25"}};
  c = ServeConfig{};
  apply_environment(c, env.fn());
  CHECK(c.sparsity == 0.25);

  for (const auto& [name, value, part] :
       {std::tuple<const char*, const char*, const char*>{"EMBER_SPARSITY", "half", "must be a number"},
        {"EMBER_SPARSITY", "0.5x", "must be a number"},
        {"EMBER_SPARSITY", "2", "must be from 0"},
        {"EMBER_SPARSE_THRESHOLD", "inf", "must be a number"},
        {"EMBER_SPARSE_THRESHOLD", "nan", "must be a number"},
        {"EMBER_SPARSE", "Dense", "dense, oracle, predictor, threshold"}}) {
    INFO(name, "=", value);
    env.vars = {{name, value}};
    ServeConfig x;
    const std::string e = error_of([&] { apply_environment(x, env.fn()); });
    CHECK(contains(e, std::string("environment variable ") + name));
    CHECK(contains(e, part));
  }
}

TEST_CASE("sparse metrics: rendered only when the engine counts them") {
  MetricsSnapshot m;
  CHECK(!contains(render_prometheus(m), "ember_sparse_"));
  m.engine.sparse_counted = true;
  m.engine.sparse_mode = "predictor";
  m.engine.sparse_decode_tokens = 10;
  m.engine.sparse_totals.tokens = 20;
  m.engine.sparse_totals.neurons = 1000;
  m.engine.sparse_totals.active = 250;
  m.engine.sparse_totals.predictor_ns = 1'500'000'000;
  m.engine.sparse_totals.ffn_ns = 2'000'000'000;
  std::string text = render_prometheus(m);
  CHECK(contains(text, "\nember_sparse_info{mode=\"predictor\"} 1\n"));
  CHECK(contains(text, "\nember_sparse_decode_tokens_total 10\n"));
  CHECK(contains(text, "\nember_sparse_ffn_active_fraction 0.25\n"));
  CHECK(contains(text, "\nember_sparse_ffn_active_neurons_total 250\n"));
  CHECK(contains(text, "\nember_sparse_predictor_seconds_total 1.5\n"));
  CHECK(contains(text, "\nember_sparse_ffn_seconds_total 2\n"));
  CHECK(contains(text, "# TYPE ember_sparse_ffn_seconds_total counter\n"));
  CHECK(!contains(text, "ember_sparse_recall"));  // diagnostics off
  m.engine.sparse_diagnostics = true;
  m.engine.sparse_totals.truly_active = 200;
  m.engine.sparse_totals.true_positive = 190;
  text = render_prometheus(m);
  CHECK(contains(text, "\nember_sparse_recall 0.94999999999999996\n"));
  CHECK(contains(text, "\nember_sparse_precision 0.76000000000000001\n"));
  CHECK(contains(text, "\nember_sparse_ffn_true_active_fraction 0.20000000000000001\n"));
}

TEST_CASE("engine with the predictor on a dReLU model: completes, metrics show the active fraction") {
  EngineOptions eo;
  eo.threads = 1;
  eo.context.n_ctx = 128;
  eo.context.sparse.mode = SparseOptions::Mode::Predictor;
  eo.context.sparse.diagnostics = true;
  eo.slots = 2;
  EngineWorker engine(Model::load(drelu_predictor_model_path()), eo);
  CHECK(engine.metrics().sparse_counted);
  CHECK(engine.metrics().sparse_totals.tokens == 0);
  CHECK(complete(engine, "Once upon a time", 12) == "");
  const EngineMetrics m = engine.metrics();
  CHECK(std::string(m.sparse_mode) == "predictor");
  CHECK(m.generated_tokens > 0);
  CHECK(m.sparse_decode_tokens > 0);
  CHECK(m.sparse_decode_tokens <= m.generated_tokens);
  CHECK(m.sparse_totals.tokens == m.sparse_decode_tokens * uint64_t(engine.model().config().n_layer));
  const double active = m.sparse_totals.active_fraction();
  MESSAGE("predictor active fraction " << active << ", recall " << m.sparse_totals.recall());
  CHECK(active > 0.0);
  CHECK(active < 1.0);
  CHECK(m.sparse_totals.truly_active > 0);
  MetricsSnapshot snap;
  snap.engine = m;
  snap.model_loaded = true;
  const std::string text = render_prometheus(snap);
  CHECK(contains(text, "ember_sparse_ffn_active_fraction "));
  CHECK(contains(text, "ember_sparse_recall "));
  CHECK(!contains(text, "ember_sparse_ffn_active_fraction 0\n"));
}

TEST_CASE("engine: a sparse mode the model cannot run fails at construction; dense counts nothing") {
  EngineOptions eo;
  eo.threads = 1;
  eo.context.n_ctx = 64;
  eo.context.sparse.mode = SparseOptions::Mode::Predictor;  // the plain tiny model has no predictor tensors
  CHECK_THROWS_AS(EngineWorker(Model::load(test_server::tiny_model_path()), eo), std::invalid_argument);

  eo.context.sparse = SparseOptions{};
  EngineWorker dense(Model::load(test_server::tiny_model_path()), eo);
  CHECK(complete(dense, "Hello", 4) == "");
  CHECK(!dense.metrics().sparse_counted);
  MetricsSnapshot snap;
  snap.engine = dense.metrics();
  CHECK(!contains(render_prometheus(snap), "ember_sparse_"));
}

TEST_CASE("engine on a mixture of experts: completes on two slots, metrics count the routing") {
  EngineOptions eo;
  eo.threads = 1;
  eo.context.n_ctx = 128;
  eo.slots = 2;
  EngineWorker engine(Model::load(test_server::moe_tiny_model_path()), eo);
  const ModelConfig& c = engine.model().config();
  REQUIRE(c.is_moe());
  CHECK(complete(engine, "Once upon a time", 10) == "");
  CHECK(complete(engine, "The little dog", 6) == "");
  const EngineMetrics m = engine.metrics();
  REQUIRE(m.moe_expert_routed.size() == static_cast<size_t>(c.n_layer * c.n_expert));
  // Every evaluated token (prompt and generated, the last generated one is never evaluated) is
  // routed to expert_used_count experts in every layer.
  const uint64_t evaluated = m.prefill_tokens + m.generated_tokens - 2;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    uint64_t routed = 0;
    for (int64_t e = 0; e < c.n_expert; ++e) routed += m.moe_expert_routed[static_cast<size_t>(l * c.n_expert + e)];
    CHECK(routed == evaluated * static_cast<uint64_t>(c.n_expert_used));
  }
  CHECK(m.moe_pairs == (evaluated - 2) * static_cast<uint64_t>(c.n_layer));  // pairs within each sequence
  CHECK(m.moe_top1_repeats <= m.moe_overlaps);
  CHECK(m.moe_overlaps <= m.moe_pairs);
  MetricsSnapshot snap;
  snap.engine = m;
  snap.model_loaded = true;
  const std::string text = render_prometheus(snap);
  CHECK(contains(text, "ember_moe_expert_routed_total{layer=\"1\",expert=\"7\"} "));
  CHECK(contains(text, "ember_moe_top1_repeats_total "));
  snap.engine = EngineMetrics{};
  CHECK(!contains(render_prometheus(snap), "ember_moe_"));
}

}  // namespace ember::server
