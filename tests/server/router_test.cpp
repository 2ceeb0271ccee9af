// The router and the access gate without sockets: a recording Responder stands in for the
// connection, a ServerState without an engine for a daemon whose model is still loading.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "server/completion_events.h"
#include "server/router.h"

using namespace ember::server;
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

struct Sent {
  Response res;
  bool close = false;
};

class RecordingResponder final : public Responder {
 public:
  void send(Response res, bool close) override { sent.push_back({std::move(res), close}); }
  void offload(std::function<void()> work, std::function<void()> then) override {
    work();
    then();
  }
  void run_generation(EngineWorker&, GenerationJob, std::shared_ptr<CompletionEvents>) override { ++generations; }
  std::function<void(std::function<void()>)> poster() override {
    return [](std::function<void()> work) { work(); };
  }

  std::vector<Sent> sent;
  int generations = 0;
};

struct Harness {
  explicit Harness(ServerOptions options = {}, bool check_host = false)
      : state(std::move(options), 1700000000), ctx(state, check_host) {}

  // Routes one request and returns its only answer.
  Sent route(http::verb verb, const std::string& target, const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    Request req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1:8080");
    for (const auto& [name, value] : headers) req.set(name, value);
    RecordingResponder out;
    ember::server::route(req, ctx, out);
    REQUIRE(out.sent.size() == 1);
    return out.sent.front();
  }

  ServerState state;
  RouteContext ctx;
};

std::string error_code_of(const Response& res) { return json::parse(res.body())["error"]["code"].get<std::string>(); }

}  // namespace

TEST_CASE("router: an unknown path is 404 and names the path") {
  Harness h;
  const Sent s = h.route(http::verb::get, "/v2/nothing?x=1");
  CHECK(s.res.result() == http::status::not_found);
  CHECK(s.res.body().find("'/v2/nothing'") != std::string::npos);
  CHECK(h.ctx.endpoint == Endpoint::Other);
  CHECK(!s.close);
}

TEST_CASE("router: a wrong method is 405 with Allow naming the one method") {
  Harness h;
  Sent s = h.route(http::verb::post, "/health");
  CHECK(s.res.result() == http::status::method_not_allowed);
  CHECK(s.res[http::field::allow] == "GET");
  CHECK(s.res.body().find("method POST is not allowed on /health") != std::string::npos);

  s = h.route(http::verb::get, "/v1/chat/completions");
  CHECK(s.res.result() == http::status::method_not_allowed);
  CHECK(s.res[http::field::allow] == "POST");
  CHECK(h.ctx.endpoint == Endpoint::ChatCompletions);
}

TEST_CASE("router: while the model loads, /health says so and model endpoints answer 503 with Retry-After") {
  Harness h;
  Sent s = h.route(http::verb::get, "/health");
  CHECK(s.res.result() == http::status::service_unavailable);
  CHECK(json::parse(s.res.body())["status"] == "loading");

  for (const char* target : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"}) {
    CAPTURE(target);
    s = h.route(http::verb::post, target);
    CHECK(s.res.result() == http::status::service_unavailable);
    CHECK(s.res[http::field::retry_after] == "5");
    CHECK(error_code_of(s.res) == "model_loading");
  }
  // The model list answers without the model.
  s = h.route(http::verb::get, "/v1/models");
  CHECK(s.res.result() == http::status::ok);
  CHECK(json::parse(s.res.body())["data"][0]["id"] == "ember");
  s = h.route(http::verb::get, "/v1/models/other");
  CHECK(s.res.result() == http::status::not_found);
  CHECK(error_code_of(s.res) == "model_not_found");
}

TEST_CASE("router: a stopping server refuses everything with 503 and closes") {
  Harness h;
  h.state.stopping.store(true);
  const Sent s = h.route(http::verb::get, "/health");
  CHECK(s.res.result() == http::status::service_unavailable);
  CHECK(error_code_of(s.res) == "server_shutdown");
  CHECK(s.close);
}

TEST_CASE("access gate: a missing or wrong API key is 401 before routing; /health stays public") {
  ServerOptions o;
  o.api_keys = {"sesame"};
  Harness h(o);
  Sent s = h.route(http::verb::get, "/v1/models");
  CHECK(s.res.result() == http::status::unauthorized);
  CHECK(s.res[http::field::www_authenticate] == "Bearer");
  CHECK(error_code_of(s.res) == "invalid_api_key");
  // Even a path that does not exist: nothing is revealed without the key.
  CHECK(h.route(http::verb::get, "/nowhere").res.result() == http::status::unauthorized);
  CHECK(h.route(http::verb::get, "/v1/models", {{"Authorization", "Bearer wrong"}}).res.result() ==
        http::status::unauthorized);

  CHECK(h.route(http::verb::get, "/v1/models", {{"Authorization", "Bearer sesame"}}).res.result() == http::status::ok);
  CHECK(h.route(http::verb::get, "/v1/models", {{"X-Api-Key", "sesame"}}).res.result() == http::status::ok);
  CHECK(h.route(http::verb::get, "/health").res.result() == http::status::service_unavailable);  // loading, not 401
}

TEST_CASE("access gate: a foreign Host on a loopback listener is 403") {
  Harness h({}, /*check_host=*/true);
  Sent s = h.route(http::verb::get, "/health", {{"Host", "attacker.example"}});
  CHECK(s.res.result() == http::status::forbidden);
  CHECK(error_code_of(s.res) == "host_not_allowed");
  CHECK(h.ctx.cors_origin.empty());
  CHECK(h.route(http::verb::get, "/v1/models", {{"Host", "localhost:8080"}}).res.result() == http::status::ok);
}

TEST_CASE("access gate: origins: a foreign page is refused; an allowed one's preflight is answered") {
  ServerOptions o;
  o.cors_origins = {"https://app.example"};
  Harness h(o);
  Sent s = h.route(http::verb::post, "/v1/completions", {{"Origin", "https://evil.example"}});
  CHECK(s.res.result() == http::status::forbidden);
  CHECK(error_code_of(s.res) == "cors_origin_not_allowed");

  s = h.route(http::verb::options, "/v1/completions",
              {{"Origin", "https://app.example"}, {"Access-Control-Request-Headers", "content-type"}});
  CHECK(s.res.result() == http::status::no_content);
  CHECK(s.res[http::field::access_control_allow_methods] == "GET, POST, OPTIONS");
  CHECK(s.res[http::field::access_control_allow_headers] == "content-type");
  CHECK(h.ctx.cors_origin == "https://app.example");  // the connection echoes it

  s = h.route(http::verb::options, "/v1/completions", {{"Origin", "https://evil.example"}});
  CHECK(s.res.result() == http::status::forbidden);
}

TEST_CASE("http message: responses speak the request's version; 1.0 and older get 1.0") {
  CHECK(response_version(10) == 10);
  CHECK(response_version(9) == 10);
  CHECK(response_version(11) == 11);
  CHECK(response_version(20) == 11);
  CHECK(path_of("/v1/models?x=1") == "/v1/models");
  CHECK(quote_excerpt(std::string(150, 'a')).size() == 100 + 5);
}
