// The configuration of `ember serve`: file keys, environment variables, precedence, errors, the
// API key file, masking, and that config/ember.json and config/README.md match the built-in table.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "server/serve_config.h"
#include "tests/server/config_test_support.h"
#include "tests/support/fixtures.h"

namespace {

using ember::server::ServeConfig;
using nlohmann::json;
namespace fs = std::filesystem;

std::optional<fs::path> source_file(const std::string& relative) {
  const fs::path p = ember::test::source_dir() / relative;
  if (!fs::exists(p)) return std::nullopt;
  return p;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TempFile {
  explicit TempFile(const std::string& text, const std::string& suffix = ".json") {
    static int counter = 0;
    path = "/tmp/ember-serve-config-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + suffix;
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TempFile() { std::remove(path.c_str()); }
  std::string path;
};

using ember::server::test::contains;
using ember::server::test::Env;
using ember::server::test::error_of;

}  // namespace

TEST_CASE("config/ember.json lists every key at the built-in default") {
  const auto path = source_file("config/ember.json");
  REQUIRE_MESSAGE(path, "config/ember.json not found above the working directory or the test binary");
  // Same keys, values and order (ordered_json compares objects in order).
  const nlohmann::ordered_json file = nlohmann::ordered_json::parse(read_text(*path));
  CHECK(file == ember::server::to_json(ServeConfig{}));
  // Loading it changes nothing.
  ServeConfig c;
  ember::server::load_config_file(c, path->string());
  CHECK(ember::server::to_json(c) == ember::server::to_json(ServeConfig{}));
}

TEST_CASE("config/README.md documents every key and environment variable") {
  const auto path = source_file("config/README.md");
  REQUIRE(path);
  const std::string doc = read_text(*path);
  for (const auto& s : ember::server::setting_names()) {
    INFO(s.key);
    CHECK(contains(doc, "`" + s.key + "`"));
    if (!s.env.empty()) CHECK(contains(doc, "`" + s.env + "`"));
  }
  CHECK(contains(doc, "`EMBER_CONFIG`"));
}

TEST_CASE("a partial file changes only its keys") {
  ServeConfig c;
  ember::server::apply_config_json(
      c, json::parse(R"({"server":{"port":9000,"listen":["unix:/tmp/e.sock","[::1]:81"]},"engine":{"parallel":4},
                         "model":{"path":"/m.gguf","mmap":false,"chat_template":"chatml"},
                         "limits":{"max_tokens":256}})"),
      "t");
  CHECK(c.server.port == 9000);
  CHECK(c.server.listen == std::vector<std::string>{"unix:/tmp/e.sock", "[::1]:81"});
  CHECK(c.slots == 4);
  CHECK(c.model_path == "/m.gguf");
  CHECK_FALSE(c.mmap);
  CHECK(c.server.chat_template == "chatml");
  CHECK(c.server.limits.max_tokens == 256);
  // untouched
  CHECK(c.server.host == "127.0.0.1");
  CHECK(c.queue == 16);
  CHECK(c.repack);
  CHECK(c.server.request_timeout == std::chrono::seconds(600));
}

TEST_CASE("unknown sections and keys are errors naming the key and the source") {
  ServeConfig c;
  std::string e = error_of([&] { ember::server::apply_config_json(c, json::parse(R"({"server":{"prot":1}})"), "config file /x.json"); });
  CHECK(contains(e, "config file /x.json"));
  CHECK(contains(e, "server.prot"));
  e = error_of([&] { ember::server::apply_config_json(c, json::parse(R"({"server":{"threads":1}})"), "f"); });
  CHECK(contains(e, "did you mean \"model.threads\""));
  e = error_of([&] { ember::server::apply_config_json(c, json::parse(R"({"servr":{}})"), "f"); });
  CHECK(contains(e, "unknown section \"servr\""));
  e = error_of([&] { ember::server::apply_config_json(c, json::parse(R"([1,2])"), "f"); });
  CHECK(contains(e, "JSON object"));
  e = error_of([&] { ember::server::apply_config_json(c, json::parse(R"({"server":8080})"), "f"); });
  CHECK(contains(e, "server must be an object"));
}

TEST_CASE("wrong types and out-of-range values name the key") {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"server":{"port":"8080"}})", "server.port"},
      {R"({"server":{"port":70000}})", "server.port"},
      {R"({"server":{"port":80.5}})", "server.port"},
      {R"({"model":{"threads":-1}})", "model.threads"},
      {R"({"model":{"mmap":"yes"}})", "model.mmap"},
      {R"({"model":{"chat_template":"jinja"}})", "model.chat_template"},
      {R"({"model":{"alias":"my model"}})", "model.alias"},
      {R"({"engine":{"parallel":0}})", "engine.parallel"},
      {R"({"engine":{"queue":18446744073709551615}})", "engine.queue"},
      {R"({"server":{"host":""}})", "server.host"},
      {R"({"server":{"listen":"unix:/a"}})", "server.listen"},
      {R"({"server":{"listen":["nocolon"]}})", "server.listen"},
      {R"({"server":{"listen":["::1:80"]}})", "server.listen"},
      {R"({"server":{"listen":["unix:"]}})", "server.listen"},
      {R"({"server":{"listen":["localhost:65536"]}})", "server.listen"},
      {R"({"server":{"listen":[":80"]}})", "server.listen"},
      {R"({"server":{"max_body_bytes":10}})", "server.max_body_bytes"},
      {R"({"server":{"io_timeout_seconds":0}})", "server.io_timeout_seconds"},
      {R"({"limits":{"max_tokens":0}})", "limits.max_tokens"},
      {R"({"security":{"api_keys":["a b"]}})", "security.api_keys"},
      {R"({"security":{"api_keys":[""]}})", "security.api_keys"},
      {R"({"security":{"api_keys":[7]}})", "security.api_keys"},
      {R"({"security":{"cors_origins":["http://localhost:3000/"]}})", "security.cors_origins"},
      {R"({"security":{"cors_origins":["localhost"]}})", "security.cors_origins"},
      {R"({"security":{"allowed_hosts":["a/b"]}})", "security.allowed_hosts"},
  };
  for (const auto& [doc, key] : cases) {
    ServeConfig c;
    const std::string e = error_of([&] { ember::server::apply_config_json(c, json::parse(doc), "src"); });
    INFO(doc, " -> ", e);
    CHECK(contains(e, key));
    CHECK(contains(e, "src"));
    CHECK(e.find('\n') == std::string::npos);
  }
  // The accepted spellings of the same keys.
  ServeConfig c;
  CHECK_NOTHROW(ember::server::apply_config_json(
      c, json::parse(R"({"security":{"cors_origins":["*","http://localhost:3000"],"allowed_hosts":["my.box"]},
                         "server":{"port":0,"listen":["unix:/run/ember.sock","0.0.0.0:0"]}})"),
      "src"));
}

TEST_CASE("environment variables override the file; flags are applied last by the caller") {
  TempFile file(R"({"server":{"port":9000,"host":"127.0.0.2"},"model":{"threads":3}})");
  ServeConfig c;
  ember::server::load_config_file(c, file.path);
  Env env{{{"EMBER_PORT", " 9100 "}, {"EMBER_THREADS", ""}, {"EMBER_MMAP", "off"}, {"EMBER_PREFIX_REUSE", "No"},
           {"EMBER_LISTEN", "unix:/tmp/a.sock, 127.0.0.1:8081,"}, {"EMBER_API_KEY", "k1,k2"},
           {"EMBER_CORS_ORIGINS", "*"}, {"EMBER_MODEL", "/models/x.gguf"}, {"EMBER_REQUEST_TIMEOUT", "30"}}};
  ember::server::apply_environment(c, env.fn());
  CHECK(c.server.port == 9100);           // env over file
  CHECK(c.server.host == "127.0.0.2");    // file over default
  CHECK(c.threads == 3);                  // an empty variable is unset
  CHECK_FALSE(c.mmap);
  CHECK_FALSE(c.reuse_prefix);
  CHECK(c.server.listen == std::vector<std::string>{"unix:/tmp/a.sock", "127.0.0.1:8081"});
  CHECK(c.server.api_keys == std::vector<std::string>{"k1", "k2"});
  CHECK(c.server.cors_origins == std::vector<std::string>{"*"});
  CHECK(c.model_path == "/models/x.gguf");
  CHECK(c.server.request_timeout == std::chrono::seconds(30));
  // A later source (the flags) goes through the same function.
  ember::server::apply_config_json(c, json{{"server", {{"port", 9200}}}}, "flag --port");
  CHECK(c.server.port == 9200);
}

TEST_CASE("bad environment values name the variable") {
  const std::pair<const char*, const char*> cases[] = {
      {"EMBER_PORT", "80x"}, {"EMBER_PORT", "99999"}, {"EMBER_THREADS", "-2"},
      {"EMBER_MMAP", "maybe"}, {"EMBER_LISTEN", "unix:"}, {"EMBER_CHAT_TEMPLATE", "nope"},
      {"EMBER_CTX_SIZE", "99999999999999999999999"},
      // A key list of only separators would switch authentication off: an error, not "no keys".
      {"EMBER_API_KEY", ","}, {"EMBER_API_KEY", ",,"}, {"EMBER_API_KEY", " , "}, {"EMBER_CORS_ORIGINS", ","},
  };
  for (const auto& [name, value] : cases) {
    ServeConfig c;
    Env env{{{name, value}}};
    const std::string e = error_of([&] { ember::server::apply_environment(c, env.fn()); });
    INFO(name, "=", value, " -> ", e);
    CHECK(contains(e, name));
  }
  {
    // ... and it must not replace the config file's keys on the way.
    TempFile file(R"({"security":{"api_keys":["from-file"]}})");
    ServeConfig c;
    ember::server::load_config_file(c, file.path);
    Env comma{{{"EMBER_API_KEY", ","}}};
    CHECK(contains(error_of([&] { ember::server::apply_environment(c, comma.fn()); }), "lists nothing"));
  }
  Env env{{{"EMBER_CONFIG", "/etc/ember.json"}}};
  CHECK(ember::server::config_file_from_environment(env.fn()) == std::optional<std::string>("/etc/ember.json"));
  CHECK_FALSE(ember::server::config_file_from_environment(Env{}.fn()));
}

TEST_CASE("config files that cannot be read or parsed give one line naming the file") {
  ServeConfig c;
  std::string e = error_of([&] { ember::server::load_config_file(c, "/nonexistent/ember.json"); });
  CHECK(contains(e, "/nonexistent/ember.json"));
  TempFile bad("{\"server\": {\"port\": 80,}\n}");
  e = error_of([&] { ember::server::load_config_file(c, bad.path); });
  CHECK(contains(e, bad.path));
  CHECK(contains(e, "line 1"));
  CHECK(e.find('\n') == std::string::npos);
  TempFile unknown(R"({"limits":{"max_token":5}})");
  e = error_of([&] { ember::server::load_config_file(c, unknown.path); });
  CHECK(contains(e, "config file " + unknown.path));
  CHECK(contains(e, "limits.max_token"));
}

TEST_CASE("API key files: one key per line, comments and blank lines skipped") {
  TempFile keys("# keys for the phone app\n\n  sk-one  \r\nsk-two\n#sk-commented\n", ".keys");
  CHECK(ember::server::read_api_key_file(keys.path) == std::vector<std::string>{"sk-one", "sk-two"});

  TempFile empty("# nothing here\n\n", ".keys");
  CHECK(contains(error_of([&] { ember::server::read_api_key_file(empty.path); }), "no keys"));
  CHECK(contains(error_of([&] { ember::server::read_api_key_file("/nonexistent/keys"); }), "/nonexistent/keys"));
  TempFile spaced("sk-one\nsk two secret\n", ".keys");
  const std::string e = error_of([&] { ember::server::read_api_key_file(spaced.path); });
  CHECK(contains(e, "line 2"));
  CHECK_FALSE(contains(e, "secret"));  // never echo a key

  ServeConfig c;
  c.server.api_keys = {"sk-flag"};
  c.api_key_file = keys.path;
  CHECK(ember::server::effective_api_keys(c) == std::vector<std::string>{"sk-flag", "sk-one", "sk-two"});
}

TEST_CASE("to_json masks API keys and round-trips everything else") {
  ServeConfig c;
  c.server.api_keys = {"sk-secret-1", "sk-secret-2"};
  c.api_key_file = "/etc/ember/keys";
  c.server.port = 1234;
  c.slots = 3;
  const json j = json(ember::server::to_json(c));
  CHECK(j["security"]["api_keys"] == json::array({"***", "***"}));
  CHECK_FALSE(contains(j.dump(), "sk-secret"));
  CHECK(j["security"]["api_key_file"] == "/etc/ember/keys");
  ServeConfig back;
  json without_keys = j;
  without_keys["security"].erase("api_keys");
  ember::server::apply_config_json(back, without_keys, "round trip");
  CHECK(back.server.port == 1234);
  CHECK(back.slots == 3);
  CHECK(ember::server::to_json(back)["security"]["api_key_file"] == "/etc/ember/keys");
}

TEST_CASE("the nothing-to-listen-on check") {
  ServeConfig c;
  CHECK_NOTHROW(ember::server::check_config(c));
  c.server.tcp = false;
  CHECK(contains(error_of([&] { ember::server::check_config(c); }), "nothing to listen on"));
  c.server.listen = {"unix:/tmp/x.sock"};
  CHECK_NOTHROW(ember::server::check_config(c));
}
