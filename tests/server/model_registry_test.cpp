// Several models by name without real models: the catalog over a scratch directory (ids are never
// paths), keep_alive values, and the registry's loading, keep-alive, LRU eviction and memory limit
// with a loader that only records what it was asked (no engine: the tests never run one).
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "server/keep_alive.h"
#include "server/model_catalog.h"
#include "server/model_registry.h"
#include "tests/support/scratch_dir.h"

using namespace ember::server;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = ember::test::scratch_dir("ember-models-test") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_file(const fs::path& path, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out << std::string(bytes, 'x');
}

std::vector<std::string> ids_of(const std::vector<ModelEntry>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) out.push_back(e.id);
  return out;
}

// A loader that makes ServedModels without engines, of the sizes it is told, and can hold a load.
struct FakeModels {
  std::mutex mu;
  std::map<std::string, uint64_t> sizes;
  std::set<std::string> broken;
  std::vector<std::string> loads;
  std::shared_future<void> gate;  // when valid, every load waits for it
  std::vector<std::string> log;

  ModelRegistry::Loader loader() {
    return [this](const ModelEntry& e) {
      std::shared_future<void> wait;
      {
        std::lock_guard lock(mu);
        loads.push_back(e.id);
        if (broken.count(e.id)) throw std::runtime_error("not a GGUF file");
        wait = gate;
      }
      if (wait.valid()) wait.wait();
      auto m = std::make_unique<ServedModel>();
      std::lock_guard lock(mu);
      m->account_bytes = sizes[e.id];
      return m;
    };
  }
  ModelRegistry::Estimate estimate() {
    return [this](const ModelEntry& e) {
      std::lock_guard lock(mu);
      return sizes[e.id];
    };
  }
  ModelRegistry::Log logger() {
    return [this](const std::string& line) {
      std::lock_guard lock(mu);
      log.push_back(line);
    };
  }
  size_t load_count() {
    std::lock_guard lock(mu);
    return loads.size();
  }
};

// acquire() as a blocking call: the lease, or the ModelUnavailable it failed with.
struct Got {
  LeasePtr lease;
  int status = 0;
  std::string code, message;
};

Got get(ModelRegistry& r, const std::string& id, std::optional<std::chrono::milliseconds> keep_alive = std::nullopt) {
  std::promise<Got> p;
  r.acquire(id, keep_alive, [&p](LeasePtr lease, std::exception_ptr e) {
    Got g;
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const ModelUnavailable& m) {
        g.status = m.status();
        g.code = m.code();
        g.message = m.what();
      }
    }
    g.lease = std::move(lease);
    p.set_value(std::move(g));
  });
  return p.get_future().get();
}

bool loaded(ModelRegistry& r, const std::string& id) {
  for (const ModelStatus& s : r.status()) {
    if (s.entry.id == id) return s.loaded;
  }
  return false;
}

bool eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 400; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return condition();
}

struct Setup {
  explicit Setup(const std::string& name, std::vector<std::string> ids = {"a", "b", "c"}) : dir(fresh_dir(name)) {
    for (const auto& id : ids) {
      write_file(dir / (id + ".gguf"), 16);
      fake.sizes[id] = 100;
    }
  }
  std::unique_ptr<ModelRegistry> registry(RegistryOptions o, std::vector<ModelEntry> fixed = {}) {
    return std::make_unique<ModelRegistry>(std::make_unique<ModelCatalog>(dir.string(), std::move(fixed), fake.logger()),
                                           o, fake.loader(), fake.estimate(), fake.logger());
  }
  fs::path dir;
  FakeModels fake;
};

}  // namespace

TEST_CASE("model ids: names only, never paths") {
  for (const char* ok : {"llama3", "qwen2.5:7b", "Mistral-7B_v0.3", "a"}) CHECK(valid_model_id(ok));
  for (const char* bad : {"", ".hidden", "..", "../x", "a/b", "/etc/passwd", "a b", "a\\b", "x\n", "caf\xc3\xa9"}) {
    CAPTURE(bad);
    CHECK_FALSE(valid_model_id(bad));
  }
  CHECK_FALSE(valid_model_id(std::string(129, 'a')));
  CHECK(valid_model_id(std::string(128, 'a')));
}

TEST_CASE("model catalog: a directory's <id>.gguf files, nothing outside it") {
  const fs::path root = fresh_dir("catalog");
  const fs::path dir = root / "models";
  fs::create_directories(dir);
  write_file(dir / "one.gguf", 10);
  write_file(dir / "notes.txt", 3);
  write_file(dir / "bad name.gguf", 3);
  write_file(root / "secret.gguf", 7);
  fs::create_directories(dir / "sub");
  write_file(dir / "sub" / "deep.gguf", 5);
  fs::create_symlink(root / "secret.gguf", dir / "escape.gguf");  // points out: skipped
  fs::create_symlink(dir / "one.gguf", dir / "alias.gguf");        // stays inside: served
  fs::create_directories(dir / "dir.gguf");                        // a directory, not a file
  std::vector<std::string> log;
  ModelCatalog catalog(dir.string(), {}, [&](const std::string& l) { log.push_back(l); });

  CHECK(ids_of(catalog.entries()) == std::vector<std::string>{"alias", "one"});
  REQUIRE(catalog.find("one"));
  CHECK(catalog.find("one")->file_bytes == 10);
  CHECK(catalog.find("alias")->path == fs::canonical(dir / "one.gguf").string());
  // Whatever a client sends, it is looked up as a name: traversal, absolute paths, the skipped.
  for (const std::string& id : std::vector<std::string>{"../secret", "escape", (root / "secret").string(), "sub/deep", "/etc/passwd",
                               "one.gguf", "../models/one", "dir", "notes"}) {
    CAPTURE(id);
    CHECK_FALSE(catalog.find(id));
  }
  // Each skipped file is said once, with the reason.
  int escape_lines = 0;
  for (const auto& l : log) escape_lines += l.find("escape.gguf") != std::string::npos;
  CHECK(escape_lines == 1);
  CHECK(std::any_of(log.begin(), log.end(), [](const std::string& l) { return l.find("outside the directory") != std::string::npos; }));

  // A file copied in later is found without a restart; one removed is gone from the list.
  write_file(dir / "two.gguf", 4);
  CHECK(catalog.find("two"));
  fs::remove(dir / "two.gguf");
  CHECK(ids_of(catalog.entries()) == std::vector<std::string>{"alias", "one"});
  CHECK_FALSE(catalog.default_model());  // two models, none pinned: a request must name one
}

TEST_CASE("model catalog: configured entries are checked at startup and win over the directory") {
  const fs::path dir = fresh_dir("catalog-fixed");
  write_file(dir / "m.gguf", 10);
  write_file(dir / "other.bin", 20);
  ModelEntry pinned{"main", (dir / "other.bin").string(), 0, true, false, {}};
  ModelEntry same{"m", (dir / "other.bin").string(), 0, false, false, {}};
  ModelCatalog catalog(dir.string(), {pinned, same}, [](const std::string&) {});
  CHECK(catalog.find("m")->file_bytes == 20);
  CHECK(catalog.default_model()->id == "main");

  const auto refused = [&](ModelEntry e) {
    try {
      ModelCatalog c("", {std::move(e)}, [](const std::string&) {});
    } catch (const std::runtime_error& x) {
      return std::string(x.what());
    }
    return std::string();
  };
  CHECK(refused({"x", (dir / "missing.gguf").string(), 0, false, false, {}}).find("missing.gguf") != std::string::npos);
  CHECK(refused({"../x", (dir / "m.gguf").string(), 0, false, false, {}}).find("not a valid id") != std::string::npos);
  CHECK(refused({"x", dir.string(), 0, false, false, {}}).find("regular file") != std::string::npos);
  CHECK_THROWS_AS(ModelCatalog((dir / "m.gguf").string(), {}, [](const std::string&) {}), std::runtime_error);
}

TEST_CASE("keep_alive: seconds or a duration; negative is forever") {
  CHECK(parse_keep_alive(json(30)) == 30s);
  CHECK(parse_keep_alive(json(0)) == 0ms);
  CHECK(parse_keep_alive(json(-1)).count() < 0);
  CHECK(parse_keep_alive(json(1.5)) == 1500ms);
  CHECK(parse_keep_alive(json("5m")) == 5min);
  CHECK(parse_keep_alive(json("1h")) == 1h);
  CHECK(parse_keep_alive(json("300ms")) == 300ms);
  CHECK(parse_keep_alive(json("45")) == 45s);
  CHECK(parse_keep_alive(json("-1")).count() < 0);
  for (const json& bad : {json("5 minutes"), json("m"), json(""), json(true), json::array(), json(1e9), json("9999h")}) {
    CAPTURE(bad.dump());
    CHECK_THROWS_AS(parse_keep_alive(bad), std::invalid_argument);
  }
  CHECK(keep_alive_text(5min) == "5m");
  CHECK(keep_alive_text(30s) == "30s");
  CHECK(keep_alive_text(1500ms) == "1500ms");
  CHECK(keep_alive_text(-1ms) == "-1");
}

TEST_CASE("model registry: loads on first use, once for concurrent requests, and names unknown models") {
  Setup s("registry-load");
  std::promise<void> open;
  s.fake.gate = open.get_future().share();
  auto r = s.registry({});
  CHECK_FALSE(loaded(*r, "a"));

  // Two requests while the load runs: one load, both leased when it ends.
  std::promise<Got> first, second;
  r->acquire("a", std::nullopt, [&](LeasePtr l, std::exception_ptr) { first.set_value({std::move(l), 0, "", ""}); });
  r->acquire("a", std::nullopt, [&](LeasePtr l, std::exception_ptr) { second.set_value({std::move(l), 0, "", ""}); });
  CHECK(eventually([&] { return r->status()[0].loading; }));
  // Another model's unknown id is answered at once while the load is held.
  const Got unknown = get(*r, "nothere");
  CHECK(unknown.status == 404);
  CHECK(unknown.code == "model_not_found");
  CHECK(unknown.message.find("'a', 'b', 'c'") != std::string::npos);
  CHECK(get(*r, "../a").code == "model_not_found");
  open.set_value();
  Got g1 = first.get_future().get(), g2 = second.get_future().get();
  REQUIRE(g1.lease);
  REQUIRE(g2.lease);
  CHECK(g1.lease->model().id == "a");
  CHECK(s.fake.load_count() == 1);
  CHECK(loaded(*r, "a"));
  CHECK(r->status()[0].active == 2);
  // No model named and none pinned among several: the client must say which.
  CHECK(get(*r, "").code == "model_required");
}

TEST_CASE("model registry: keep_alive 0 unloads when the last request ends; the default after its time") {
  Setup s("registry-keepalive");
  RegistryOptions o;
  o.keep_alive = 100ms;
  auto r = s.registry(o);
  {
    Got g = get(*r, "a", 0ms);
    REQUIRE(g.lease);
    Got g2 = get(*r, "a", 0ms);
    g.lease.reset();
    CHECK(loaded(*r, "a"));  // still in use by the second
  }
  CHECK(eventually([&] { return !loaded(*r, "a"); }));
  CHECK(r->counters().unloads_idle == 1);

  Got b = get(*r, "b");
  b.lease.reset();
  CHECK(loaded(*r, "b"));
  CHECK(r->status()[1].unloads_in.has_value());
  CHECK(eventually([&] { return !loaded(*r, "b"); }));

  // Negative: kept for good.
  get(*r, "c", -1ms);
  std::this_thread::sleep_for(250ms);
  CHECK(loaded(*r, "c"));
  CHECK_FALSE(r->status()[2].unloads_in.has_value());
}

TEST_CASE("model registry: at most max_loaded, the least recently used idle model goes first") {
  Setup s("registry-lru");
  RegistryOptions o;
  o.max_loaded = 2;
  auto r = s.registry(o);
  get(*r, "a");
  get(*r, "b");
  get(*r, "a");  // a is now the more recent
  get(*r, "c");
  CHECK(loaded(*r, "a"));
  CHECK_FALSE(loaded(*r, "b"));
  CHECK(loaded(*r, "c"));
  CHECK(r->counters().unloads_evicted == 1);

  // Both loaded models busy: a third is refused, naming them, and loads once one is idle.
  Got hold_a = get(*r, "a"), hold_c = get(*r, "c");
  Got refused = get(*r, "b");
  CHECK(refused.status == 503);
  CHECK(refused.code == "model_capacity");
  CHECK(refused.message.find("'a', 'c'") != std::string::npos);
  // A model whose request ends within a moment makes room without a 503 (the client that got
  // its answer and names the next model at once).
  std::thread ends_soon([&] {
    std::this_thread::sleep_for(200ms);
    hold_c.lease.reset();
  });
  CHECK(get(*r, "b").lease);
  ends_soon.join();
  CHECK_FALSE(loaded(*r, "c"));
}

TEST_CASE("model registry: one memory limit across models; pinned models stay") {
  Setup s("registry-memory");
  s.fake.sizes = {{"a", 600}, {"b", 500}, {"c", 300}, {"main", 400}};
  write_file(s.dir / "main.bin", 8);
  RegistryOptions o;
  o.memory_limit = 1000;
  auto r = s.registry(o, {ModelEntry{"main", (s.dir / "main.bin").string(), 0, true, false, {}}});
  r->load_now("main");
  CHECK(r->default_id() == "main");
  CHECK(get(*r, "").lease->model().id == "main");

  CHECK(get(*r, "b").lease);   // 400 + 500
  CHECK(get(*r, "a").lease);   // 400 + 600: b goes (idle), main stays (pinned)
  CHECK_FALSE(loaded(*r, "b"));
  CHECK(loaded(*r, "main"));
  CHECK(r->counters().account_bytes == 1000);

  // a busy: b (500) cannot fit next to main + a; the 503 names the need and the limit.
  Got hold = get(*r, "a");
  Got refused = get(*r, "b");
  CHECK(refused.status == 503);
  CHECK(refused.code == "insufficient_memory");
  CHECK(refused.message.find("limit") != std::string::npos);
  // Larger than the whole limit: refused whatever is idle.
  {
    std::lock_guard lock(s.fake.mu);
    s.fake.sizes["c"] = 2000;
  }
  CHECK(get(*r, "c").message.find("more than the whole memory limit") != std::string::npos);
  hold.lease.reset();
  CHECK(get(*r, "b").lease);
  CHECK(r->counters().load_failures == 2);
}

TEST_CASE("model registry: a failed load is a 500 naming the model and the cause, and can be retried") {
  Setup s("registry-broken");
  s.fake.broken = {"a"};
  auto r = s.registry({});
  Got g = get(*r, "a");
  CHECK(g.status == 500);
  CHECK(g.code == "model_load_failed");
  CHECK(g.message.find("'a'") != std::string::npos);
  CHECK(g.message.find("not a GGUF file") != std::string::npos);
  CHECK_FALSE(loaded(*r, "a"));
  {
    std::lock_guard lock(s.fake.mu);
    s.fake.broken.clear();
  }
  CHECK(get(*r, "a").lease);
}

TEST_CASE("model registry: unload now, when idle, or not loaded; pressure unloads idle models") {
  Setup s("registry-unload");
  auto r = s.registry({});
  CHECK(r->unload("a") == ModelRegistry::UnloadResult::NotLoaded);
  get(*r, "a");
  CHECK(r->unload("a") == ModelRegistry::UnloadResult::Unloaded);
  CHECK_FALSE(loaded(*r, "a"));
  Got busy = get(*r, "b");
  CHECK(r->unload("b") == ModelRegistry::UnloadResult::WhenIdle);
  CHECK(loaded(*r, "b"));
  busy.lease.reset();
  CHECK(eventually([&] { return !loaded(*r, "b"); }));

  get(*r, "a");
  Got in_use = get(*r, "c");
  CHECK(r->unload_idle("memory pressure") == 1);
  CHECK_FALSE(loaded(*r, "a"));
  CHECK(loaded(*r, "c"));
  CHECK(r->counters().unloads_pressure == 1);
}

TEST_CASE("model registry: stop fails waiting requests with 503 server_shutdown") {
  Setup s("registry-stop");
  std::promise<void> open;
  s.fake.gate = open.get_future().share();
  auto r = s.registry({});
  std::promise<Got> waiting;
  r->acquire("a", std::nullopt, [&](LeasePtr l, std::exception_ptr e) {
    Got g{std::move(l), 0, "", ""};
    try {
      if (e) std::rethrow_exception(e);
    } catch (const ModelUnavailable& m) {
      g.code = m.code();
    }
    waiting.set_value(std::move(g));
  });
  CHECK(eventually([&] { return s.fake.load_count() == 1; }));
  std::thread stopper([&] { r->stop(); });
  Got g = waiting.get_future().get();
  CHECK(g.code == "server_shutdown");
  open.set_value();
  stopper.join();
  CHECK(get(*r, "b").code == "server_shutdown");
}
