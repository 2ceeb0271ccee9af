// `ember serve` configuration from the outside: the built binary with flags, EMBER_* variables and
// a config file, checked through --print-config (which loads no model), and its one-line errors.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/fixtures.h"
#include "tests/tools/serve_cli_support.h"

namespace {

using nlohmann::json;

using Run = ember::test::EmberRun;
using ember::test::slurp;

std::string temp_path(const std::string& suffix) {
  static int counter = 0;
  return "/tmp/ember-serve-cli-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + suffix;
}

using ember::test::print_config;
using ember::test::serve;

struct TempFile {
  explicit TempFile(const std::string& text) : path(temp_path(".json")) { std::ofstream(path) << text; }
  ~TempFile() { std::remove(path.c_str()); }
  std::string path;
};

// An error run: non-zero exit, nothing on stdout, exactly one line on stderr starting "ember: error:".
void check_one_line_error(const Run& r, const std::string& must_mention) {
  INFO("stderr: ", r.err);
  CHECK(r.exit_code != 0);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("ember: error: ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find(must_mention) != std::string::npos);
}

}  // namespace

TEST_CASE("ember serve --help lists the configuration flags") {
  const Run r = serve("", "--help");
  CHECK(r.exit_code == 0);
  for (const char* flag : {"--config", "--print-config", "--listen", "--no-tcp", "--parallel", "--api-key-file",
                           "--api-key", "--cors-origin", "--allow-host", "--max-tokens", "--request-timeout",
                           "--no-prefix-reuse", "--model", "--threads", "--ctx-size", "--no-mmap", "--port"}) {
    INFO(flag);
    CHECK(r.out.find(flag) != std::string::npos);
  }
}

TEST_CASE("--print-config: defaults, then file < environment < flags") {
  const json defaults = print_config("", "");
  CHECK(defaults["server"]["port"] == 8080);
  CHECK(defaults["server"]["host"] == "127.0.0.1");
  CHECK(defaults["model"]["path"] == "");

  TempFile file(R"({"server":{"port":9000,"host":"127.0.0.2"},"engine":{"parallel":2},"model":{"threads":3}})");
  json j = print_config("", "--config " + file.path);
  CHECK(j["server"]["port"] == 9000);
  CHECK(j["server"]["host"] == "127.0.0.2");
  CHECK(j["engine"]["parallel"] == 2);

  // EMBER_CONFIG names the file when --config does not.
  j = print_config("EMBER_CONFIG=" + file.path, "");
  CHECK(j["server"]["port"] == 9000);

  // The environment beats the file, flags beat both; the rest of the file stays.
  j = print_config("EMBER_CONFIG=" + file.path + " EMBER_PORT=9100 EMBER_PARALLEL=4", "");
  CHECK(j["server"]["port"] == 9100);
  CHECK(j["engine"]["parallel"] == 4);
  CHECK(j["server"]["host"] == "127.0.0.2");
  CHECK(j["model"]["threads"] == 3);
  j = print_config("EMBER_CONFIG=" + file.path + " EMBER_PORT=9100 EMBER_PARALLEL=4", "--port 9200 -t 5");
  CHECK(j["server"]["port"] == 9200);
  CHECK(j["engine"]["parallel"] == 4);
  CHECK(j["model"]["threads"] == 5);

  // --config beats EMBER_CONFIG.
  TempFile other(R"({"server":{"port":7000}})");
  j = print_config("EMBER_CONFIG=" + file.path, "--config " + other.path);
  CHECK(j["server"]["port"] == 7000);
  CHECK(j["server"]["host"] == "127.0.0.1");
}

TEST_CASE("--print-config: repeatable flags, switches and masked keys") {
  const json j = print_config(
      "EMBER_LISTEN=unix:/tmp/from-env.sock EMBER_API_KEY=sk-env-secret",
      "--listen unix:/tmp/a.sock --listen 127.0.0.1:0 --no-tcp --no-prefix-reuse --no-mmap --api-key sk-flag-secret "
      "--api-key sk-other-secret --cors-origin http://localhost:3000 --allow-host my.box --max-tokens 64 "
      "--request-timeout 30 --alias demo --chat-template chatml");
  CHECK(j["server"]["listen"] == json::array({"unix:/tmp/a.sock", "127.0.0.1:0"}));  // the flag replaces the env list
  CHECK(j["server"]["tcp"] == false);
  CHECK(j["engine"]["prefix_reuse"] == false);
  CHECK(j["model"]["mmap"] == false);
  CHECK(j["security"]["api_keys"] == json::array({"***", "***"}));
  CHECK(j["security"]["cors_origins"] == json::array({"http://localhost:3000"}));
  CHECK(j["security"]["allowed_hosts"] == json::array({"my.box"}));
  CHECK(j["limits"]["max_tokens"] == 64);
  CHECK(j["server"]["request_timeout_seconds"] == 30);
  CHECK(j["model"]["alias"] == "demo");
  CHECK(j["model"]["chat_template"] == "chatml");
  CHECK(j.dump().find("secret") == std::string::npos);
}

TEST_CASE("bad configuration: one line naming the problem, non-zero exit") {
  check_one_line_error(serve("", "--config /nonexistent/ember.json"), "/nonexistent/ember.json");
  check_one_line_error(serve("EMBER_CONFIG=/nonexistent/env.json", ""), "/nonexistent/env.json");

  TempFile typo(R"({"server":{"prot":8080}})");
  Run r = serve("", "--print-config --config " + typo.path);
  check_one_line_error(r, "server.prot");
  CHECK(r.err.find(typo.path) != std::string::npos);

  TempFile not_json("{\"server\": ");
  check_one_line_error(serve("", "--print-config --config " + not_json.path), not_json.path);

  check_one_line_error(serve("EMBER_PORT=eighty", "--print-config"), "EMBER_PORT");
  check_one_line_error(serve("", "--print-config --listen nowhere"), "--listen");
  check_one_line_error(serve("", "--print-config --port 70000"), "--port");
  check_one_line_error(serve("", "--print-config --no-tcp"), "nothing to listen on");
  check_one_line_error(serve("", "--print-config --chat-template jinja"), "chat_template");
}

TEST_CASE("an unreadable API key file stops ember serve before it loads anything") {
  check_one_line_error(serve("", "--port 0 --api-key-file /nonexistent/keys"), "/nonexistent/keys");
}

namespace {

using ember::test::Daemon;
using ember::test::wait_for_text;

// One HTTP/1.0 GET over a connected socket; the whole response.
std::string get_over(int fd, const std::string& target) {
  const std::string req = "GET " + target + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != ssize_t(req.size())) return {};
  std::string out;
  std::array<char, 4096> buf;
  ssize_t n;
  while ((n = ::recv(fd, buf.data(), buf.size(), 0)) > 0) out.append(buf.data(), size_t(n));
  ::close(fd);
  return out;
}

std::string get_unix(const std::string& path, const std::string& target) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return {};
  }
  return get_over(fd, target);
}

}  // namespace

TEST_CASE("ember serve from a config file: Unix socket only, logs each stage, exits 0 on SIGTERM" *
          ember::test::needs_fixtures) {
  auto model = ember::test::fixture("models/stories260K.gguf");
  if (!model) return;
  const std::string sock = temp_path(".sock");
  TempFile config(R"({"model":{"path":")" + model->string() + R"(","alias":"tiny-stories","threads":1},
                      "server":{"tcp":false,"listen":["unix:)" + sock + R"("],"shutdown_grace_seconds":1}})");
  const std::string err = temp_path(".err");
  Daemon d({"serve", "--config", config.path}, err);
  const std::string log = wait_for_text(err, "ember: ready");
  INFO("log: ", log);
  REQUIRE(log.find("ember: ready: model 'tiny-stories'") != std::string::npos);
  CHECK(log.find("listening on unix:" + sock) != std::string::npos);
  CHECK(log.find("listening on http") == std::string::npos);  // tcp is off
  CHECK(log.find("loading model " + model->string()) != std::string::npos);
  CHECK(log.find("listening") < log.find("loading model"));  // the server answers while the model loads

  const std::string health = get_unix(sock, "/health");
  CHECK(health.rfind("HTTP/1.", 0) == 0);
  CHECK(health.find(" 200 ") != std::string::npos);
  CHECK(get_unix(sock, "/v1/models").find("\"tiny-stories\"") != std::string::npos);

  CHECK(d.terminate() == 0);
  CHECK(slurp(err).find("ember: shutting down") != std::string::npos);
  std::remove(err.c_str());
}

TEST_CASE("ember serve on a port already in use fails with one line" * ember::test::needs_fixtures) {
  auto model = ember::test::fixture("models/stories260K.gguf");
  if (!model) return;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  const Run r = serve("", "-m " + model->string() + " --port " + std::to_string(port));
  ::close(fd);
  check_one_line_error(r, std::to_string(port));
}
