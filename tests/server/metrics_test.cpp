// /metrics rendering, endpoint labels, listen address parsing and /tokenize request parsing: the
// pure parts of the HTTP side.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <sstream>

#include "server/http_metrics.h"
#include "server/listen_spec.h"
#include "server/openai_api.h"
#include "server/server_state.h"
#include "server/tokenize_api.h"

using namespace ember::server;

TEST_CASE("metrics: endpoint labels come from a fixed set") {
  CHECK(endpoint_of("/health") == Endpoint::Health);
  CHECK(endpoint_of("/v1/models") == Endpoint::Models);
  CHECK(endpoint_of("/v1/models/x") == Endpoint::Model);
  CHECK(endpoint_of("/v1/models/") == Endpoint::Other);
  CHECK(endpoint_of("/v1/chat/completions") == Endpoint::ChatCompletions);
  CHECK(endpoint_of("/tokenize") == Endpoint::Tokenize);
  CHECK(endpoint_of("/whatever/you/like") == Endpoint::Other);
  CHECK(std::string(endpoint_label(Endpoint::Model)) == "/v1/models/{id}");
  CHECK(std::string(endpoint_label(Endpoint::Other)) == "other");
}

TEST_CASE("metrics: Prometheus text has HELP and TYPE for every sample's family") {
  HttpMetrics counters;
  counters.record(Endpoint::Health, 200);
  counters.record(Endpoint::Health, 200);
  counters.record(Endpoint::Other, 404);
  MetricsSnapshot m;
  m.requests = counters.requests();
  m.http_active_requests = 1;
  m.model_loaded = true;
  m.engine.generated_tokens = 100;
  m.engine.decode_seconds = 2.0;
  m.engine.prefill_tokens = 30;
  m.engine.prefill_seconds = 0.5;
  m.engine.queued_jobs = 3;
  const std::string text = render_prometheus(m);
  CHECK(text.find("ember_http_requests_total{endpoint=\"/health\",status=\"200\"} 2\n") != std::string::npos);
  CHECK(text.find("ember_http_requests_total{endpoint=\"other\",status=\"404\"} 1\n") != std::string::npos);
  CHECK(text.find("ember_decode_tokens_per_second 50\n") != std::string::npos);
  CHECK(text.find("ember_prefill_tokens_per_second 60\n") != std::string::npos);
  CHECK(text.find("ember_queue_depth 3\n") != std::string::npos);
  CHECK(text.find("ember_http_active_requests 1\n") != std::string::npos);

  std::set<std::string> helped, typed;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    REQUIRE(!line.empty());
    if (line.rfind("# HELP ", 0) == 0) {
      helped.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const std::string name = rest.substr(0, rest.find(' '));
      const std::string type = rest.substr(rest.find(' ') + 1);
      CHECK((type == "counter" || type == "gauge"));
      typed.insert(name);
    } else {
      const std::string name = line.substr(0, line.find_first_of("{ "));
      CAPTURE(line);
      CHECK(helped.count(name) == 1);
      CHECK(typed.count(name) == 1);
      const std::string value = line.substr(line.rfind(' ') + 1);
      CHECK(std::isfinite(std::stod(value)));
    }
  }
  for (const char* name : {"ember_http_requests_total", "ember_prompt_tokens_total", "ember_generated_tokens_total",
                           "ember_prefill_tokens_per_second", "ember_decode_tokens_per_second", "ember_queue_depth",
                           "ember_active_requests", "ember_http_active_requests", "ember_jobs_cancelled_total",
                           "ember_kv_cache_bytes", "ember_model_bytes", "ember_slots",
                           "ember_reused_prompt_tokens_total"}) {
    CAPTURE(name);
    CHECK(typed.count(name) == 1);
  }
  // No time yet: rates are 0, not NaN.
  const std::string empty = render_prometheus(MetricsSnapshot{});
  CHECK(empty.find("ember_decode_tokens_per_second 0\n") != std::string::npos);
}

TEST_CASE("listen: HOST:PORT, [v6]:PORT and unix:/path") {
  auto a = parse_listen_spec("127.0.0.1:8080");
  CHECK(a.kind == ListenSpec::Kind::Tcp);
  CHECK(a.host == "127.0.0.1");
  CHECK(a.port == 8080);
  CHECK(a.to_string() == "127.0.0.1:8080");
  auto b = parse_listen_spec("[::1]:0");
  CHECK(b.host == "::1");
  CHECK(b.port == 0);
  CHECK(b.to_string() == "[::1]:0");
  auto c = parse_listen_spec("unix:/run/ember.sock");
  CHECK(c.kind == ListenSpec::Kind::Unix);
  CHECK(c.path == "/run/ember.sock");
  CHECK(c.to_string() == "unix:/run/ember.sock");
  for (const char* bad : {"", "localhost", "localhost:", ":80", "h:65536", "h:-1", "h:8x", "::1:80", "[::1]", "[::1]80",
                          "unix:"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_listen_spec(bad), std::invalid_argument);
  }
  CHECK_THROWS_AS(parse_listen_spec("unix:/" + std::string(200, 'x')), std::invalid_argument);

  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 9;
  o.listen = {"unix:/tmp/x.sock"};
  auto specs = listen_specs(o);
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].port == 9);
  o.tcp = false;
  CHECK(listen_specs(o).size() == 1);
  o.listen.clear();
  CHECK_THROWS_AS(listen_specs(o), std::invalid_argument);
}

TEST_CASE("tokenize: request validation") {
  auto r = parse_tokenize_request(R"({"content":"hi","add_special":true,"with_pieces":true})", 100);
  CHECK(r.content == "hi");
  CHECK(r.add_special);
  CHECK(!r.parse_special);
  CHECK(r.with_pieces);
  for (const char* bad : {"nope", "[]", "{}", R"({"content":5})", R"({"content":"x","add_special":1})",
                          R"({"content":"x","parse_special":"yes"})"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_tokenize_request(bad, 100), BadRequest);
  }
  CHECK_THROWS_AS(parse_tokenize_request(R"({"content":"0123456789"})", 5), BadRequest);

  CHECK(parse_detokenize_request(R"({"tokens":[1,2,3]})", 10) == std::vector<int32_t>{1, 2, 3});
  CHECK(parse_detokenize_request(R"({"tokens":[]})", 10).empty());
  try {
    parse_detokenize_request(R"({"tokens":[1,10]})", 10);
    FAIL("expected BadRequest");
  } catch (const BadRequest& e) {
    CHECK(std::string(e.what()).find("tokens[1]") != std::string::npos);
    CHECK(e.param() == "tokens");
  }
  for (const char* bad : {R"({"tokens":[-1]})", R"({"tokens":[1.5]})", R"({"tokens":["1"]})", R"({"tokens":5})",
                          R"({"tokens":[18446744073709551615]})", R"({})"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_detokenize_request(bad, 10), BadRequest);
  }
  CHECK_THROWS_AS(parse_detokenize_request(R"({"tokens":[1,2,3]})", 10, 2), BadRequest);
}
