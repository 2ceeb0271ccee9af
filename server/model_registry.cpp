#include "server/model_registry.h"

#include <algorithm>
#include <cstdio>
#include <future>

#include "server/http_message.h"

namespace ember::server {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long a load that needs room waits for a model in use to become idle before a 503.
constexpr auto kBusyGrace = std::chrono::seconds(2);

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(1u << 20));
  return text;
}

std::string quoted_list(const std::vector<std::string>& ids) {
  constexpr size_t kShown = 10;
  std::string out;
  for (size_t i = 0; i < ids.size() && i < kShown; ++i) out += (i ? ", " : "") + quote_excerpt(ids[i]);
  if (ids.size() > kShown) out += " and " + std::to_string(ids.size() - kShown) + " more";
  return out.empty() ? "no model" : out;
}

}  // namespace

ChatTemplate served_chat_template(const std::string& override_name, const Model& model) {
  return resolve_chat_template(override_name.empty() ? std::nullopt : std::optional<std::string_view>(override_name),
                               model.file().metadata().get_string("tokenizer.chat_template"),
                               model.tokenizer().model_name())
      .family;
}

struct ModelLease::Core {
  struct Slot {
    ModelEntry entry;
    std::shared_ptr<ServedModel> model;  // null while loading
    std::vector<std::pair<std::optional<milliseconds>, ModelRegistry::Ready>> waiters;
    int leases = 0;
    Clock::time_point expires = Clock::time_point::max();  // when idle: unloaded from then on
    uint64_t last_used = 0;
    bool unload_requested = false;
  };

  Core(RegistryOptions o, ModelRegistry::Log l) : options(o), log(std::move(l)) {}

  // A lease on a loaded slot (under mu).
  LeasePtr lease_locked(const std::shared_ptr<Core>& self, Slot& s, std::optional<milliseconds> keep_alive) {
    ++s.leases;
    s.last_used = ++use_clock;
    s.expires = Clock::time_point::max();
    return LeasePtr(new ModelLease(self, s.model, keep_alive, true));
  }

  // When an idle slot goes (under mu).
  Clock::time_point expiry_locked(const Slot& s, std::optional<milliseconds> keep_alive) const {
    if (s.unload_requested) return Clock::now();
    if (s.entry.pinned) return Clock::time_point::max();
    const milliseconds ka = keep_alive.value_or(options.keep_alive);
    return ka.count() < 0 ? Clock::time_point::max() : Clock::now() + ka;
  }

  void release(const std::string& id, std::optional<milliseconds> keep_alive) {
    {
      std::lock_guard lock(mu);
      auto it = slots.find(id);
      if (it == slots.end() || it->second.leases == 0) return;  // stopped meanwhile
      Slot& s = it->second;
      s.last_used = ++use_clock;
      if (--s.leases == 0) s.expires = expiry_locked(s, keep_alive);
    }
    cv.notify_all();
  }

  // A look (peek) ends: its model may have been unloaded meanwhile, and this may be the last
  // reference, so the registry's thread lets it go.
  void drop_look(std::shared_ptr<ServedModel> model) {
    {
      std::lock_guard lock(mu);
      graveyard.push_back(std::move(model));
    }
    cv.notify_all();
  }

  const RegistryOptions options;
  const ModelRegistry::Log log;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Slot, std::less<>> slots;  // loaded or loading
  std::deque<std::string> load_queue;
  // Unloaded models whose engines the registry's thread stops and frees (off the caller's thread).
  std::vector<std::shared_ptr<ServedModel>> graveyard;
  uint64_t use_clock = 0;
  bool stopping = false;
  RegistryCounters counters;
};

ModelLease::~ModelLease() {
  // The model goes before the hold does: while this lease counts, the registry holds the model
  // too, so the last reference is never this one. The lease may end on the model's own engine
  // thread (a job's hold), which must not destroy (join) itself.
  if (!core_) return;
  if (!touch_) {
    core_->drop_look(std::move(model_));
    return;
  }
  const std::string id = model_->id;
  model_.reset();
  core_->release(id, keep_alive_);
}

ModelRegistry::ModelRegistry(std::unique_ptr<ModelCatalog> catalog, RegistryOptions options, Loader loader, Estimate estimate, Log log)
    : catalog_(std::move(catalog)),
      loader_(std::move(loader)),
      estimate_(std::move(estimate)),
      core_(std::make_shared<Core>(options, std::move(log))) {
  core_->counters.memory_limit = options.memory_limit;
  thread_ = std::thread([this] { run(); });
}

ModelRegistry::~ModelRegistry() { stop(); }

void ModelRegistry::fail(std::vector<std::pair<std::optional<milliseconds>, Ready>> waiters, std::exception_ptr e) {
  for (auto& [keep_alive, ready] : waiters) ready(nullptr, e);
}

std::optional<std::string> ModelRegistry::default_id() {
  {
    std::lock_guard lock(core_->mu);
    for (const auto& [id, s] : core_->slots) {
      if (s.entry.pinned) return id;
    }
  }
  if (auto e = catalog_->default_model()) return e->id;
  return std::nullopt;
}

bool ModelRegistry::knows(std::string_view id) {
  {
    std::lock_guard lock(core_->mu);
    if (core_->slots.find(id) != core_->slots.end()) return true;
  }
  return catalog_->find(id).has_value();
}

void ModelRegistry::acquire(std::string_view id, std::optional<milliseconds> keep_alive, Ready ready) {
  std::string key(id);
  if (key.empty()) {
    const auto def = default_id();
    if (!def) {
      std::vector<std::string> ids;
      for (const ModelEntry& e : catalog_->entries()) ids.push_back(e.id);
      return ready(nullptr, std::make_exception_ptr(ModelUnavailable(
                                400, "model_required",
                                "name a model in 'model': this server serves " + quoted_list(ids) + " (GET /v1/models)",
                                "model")));
    }
    key = *def;
  }
  // Loaded: a lease now. Loading: wait with the others. Neither: look it up, then queue its load.
  const auto lease_or_wait = [&](std::unique_lock<std::mutex>&) -> std::optional<LeasePtr> {
    auto it = core_->slots.find(key);
    if (it == core_->slots.end()) return std::nullopt;
    if (it->second.model) return core_->lease_locked(core_, it->second, keep_alive);
    it->second.waiters.emplace_back(keep_alive, std::move(ready));
    return LeasePtr();
  };
  std::optional<LeasePtr> got;
  {
    std::unique_lock lock(core_->mu);
    if (core_->stopping) {
      lock.unlock();
      return ready(nullptr, std::make_exception_ptr(ModelUnavailable(503, "server_shutdown", "the server is shutting down")));
    }
    got = lease_or_wait(lock);
  }
  if (got) {
    if (*got) ready(std::move(*got), nullptr);
    return;
  }
  std::optional<ModelEntry> entry = catalog_->find(key);
  if (!entry) {
    std::vector<std::string> ids;
    for (const ModelEntry& e : catalog_->entries()) ids.push_back(e.id);
    return ready(nullptr, std::make_exception_ptr(ModelUnavailable(
                              404, "model_not_found",
                              "the model " + quote_excerpt(key) + " does not exist; this server serves " +
                                  quoted_list(ids) + " (GET /v1/models)",
                              "model")));
  }
  {
    std::unique_lock lock(core_->mu);
    got = lease_or_wait(lock);
    if (!got) {
      Core::Slot slot;
      slot.entry = std::move(*entry);
      slot.waiters.emplace_back(keep_alive, std::move(ready));
      core_->slots.emplace(key, std::move(slot));
      core_->load_queue.push_back(key);
    }
  }
  if (got && *got) return ready(std::move(*got), nullptr);
  core_->cv.notify_all();
}

void ModelRegistry::load_now(std::string_view id) {
  std::promise<void> done;
  acquire(id, std::nullopt, [&done](LeasePtr, std::exception_ptr e) {
    if (e) {
      done.set_exception(e);
    } else {
      done.set_value();
    }
  });
  done.get_future().get();
}

void ModelRegistry::adopt(ModelEntry entry, std::unique_ptr<ServedModel> model) {
  std::lock_guard lock(core_->mu);
  entry.pinned = true;
  model->id = entry.id;
  Core::Slot slot;
  slot.model = std::shared_ptr<ServedModel>(std::move(model));
  slot.entry = std::move(entry);
  const std::string id = slot.entry.id;
  core_->slots.insert_or_assign(id, std::move(slot));
  ++core_->counters.loads;
}

void ModelRegistry::run() {
  std::unique_lock lock(core_->mu);
  while (!core_->stopping) {
    if (!core_->load_queue.empty()) {
      const std::string id = core_->load_queue.front();
      core_->load_queue.pop_front();
      lock.unlock();
      load(id);
      lock.lock();
      continue;
    }
    // Idle models whose keep-alive ran out go; the wait ends at the next one due.
    const auto now = Clock::now();
    auto next = Clock::time_point::max();
    std::vector<std::shared_ptr<ServedModel>> gone = std::move(core_->graveyard);
    core_->graveyard.clear();
    std::vector<std::string> lines;
    for (auto it = core_->slots.begin(); it != core_->slots.end();) {
      Core::Slot& s = it->second;
      if (s.model && s.leases == 0 && (!s.entry.pinned || s.unload_requested)) {
        if (s.expires <= now) {
          ++(s.unload_requested ? core_->counters.unloads_requested : core_->counters.unloads_idle);
          lines.push_back("unloaded model " + quote_excerpt(it->first) +
                          (s.unload_requested ? " (asked to)" : " (idle for its keep-alive)"));
          gone.push_back(std::move(s.model));
          it = core_->slots.erase(it);
          continue;
        }
        next = std::min(next, s.expires);
      }
      ++it;
    }
    if (!gone.empty()) {
      lock.unlock();
      gone.clear();  // engines stop, memory goes back (off the lock: this takes a moment)
      for (const auto& line : lines) core_->log(line);
      lock.lock();
      continue;
    }
    if (next == Clock::time_point::max()) {
      core_->cv.wait(lock);
    } else {
      core_->cv.wait_until(lock, next);
    }
  }
}

void ModelRegistry::load(const std::string& id) {
  ModelEntry entry;
  {
    std::lock_guard lock(core_->mu);
    auto it = core_->slots.find(id);
    if (it == core_->slots.end()) return;
    entry = it->second.entry;
  }
  const auto take_waiters = [this, &id] {
    std::lock_guard lock(core_->mu);
    auto it = core_->slots.find(id);
    std::vector<std::pair<std::optional<milliseconds>, Ready>> w;
    if (it != core_->slots.end()) {
      w = std::move(it->second.waiters);
      core_->slots.erase(it);
    }
    return w;
  };
  uint64_t need = 0;
  try {
    need = estimate_(entry);
  } catch (const std::exception& e) {
    // The file's header does not read: the same answer as a load that fails.
    const ModelUnavailable failed(500, "model_load_failed",
                                  "model " + quote_excerpt(id) + " could not be loaded: " + e.what(), "model");
    core_->log(failed.what());
    {
      std::lock_guard lock(core_->mu);
      ++core_->counters.load_failures;
    }
    return fail(take_waiters(), std::make_exception_ptr(failed));
  }

  // Room first: idle models go, least recently used first, until the count and the memory fit.
  std::vector<std::shared_ptr<ServedModel>> evicted;
  std::vector<std::string> lines;
  std::optional<ModelUnavailable> refusal;
  {
    std::unique_lock lock(core_->mu);
    const RegistryOptions& o = core_->options;
    // A model in use may be about to be idle (its answer is on the way to a client that asks for
    // the next model at once): wait a moment for that before refusing.
    const auto give_up = Clock::now() + kBusyGrace;
    for (;;) {
      size_t loaded = 0;
      uint64_t used = 0;
      bool may_free = false;  // a model in use that could be unloaded once idle
      std::vector<std::string> busy;
      for (const auto& [k, s] : core_->slots) {
        if (!s.model) continue;
        ++loaded;
        used += s.model->account_bytes;
        if (s.leases > 0 || s.entry.pinned) busy.push_back(k);
        may_free = may_free || (s.leases > 0 && !s.entry.pinned);
      }
      const bool count_ok = loaded < o.max_loaded;
      const bool memory_ok = o.memory_limit == 0 || used + need <= o.memory_limit;
      if (count_ok && memory_ok) break;
      Core::Slot* victim = nullptr;
      std::string victim_id;
      for (auto& [k, s] : core_->slots) {
        if (s.model && s.leases == 0 && !s.entry.pinned && (!victim || s.last_used < victim->last_used)) {
          victim = &s;
          victim_id = k;
        }
      }
      const bool never_fits = o.memory_limit != 0 && need > o.memory_limit;
      if (!victim && may_free && !never_fits && !core_->stopping && Clock::now() < give_up) {
        core_->cv.wait_until(lock, give_up);
        continue;
      }
      if (!victim) {
        const std::string what = "cannot load model " + quote_excerpt(id) + ": ";
        if (!count_ok) {
          refusal.emplace(503, "model_capacity",
                          what + std::to_string(loaded) + " models are loaded (the most allowed: max_loaded_models) "
                                 "and none is idle (" + quoted_list(busy) + "); retry when one is",
                          "model");
        } else if (need > o.memory_limit) {
          refusal.emplace(503, "insufficient_memory",
                          what + "it needs about " + mib(need) + ", more than the whole memory limit of " +
                              mib(o.memory_limit),
                          "model");
        } else {
          refusal.emplace(503, "insufficient_memory",
                          what + "it needs about " + mib(need) + " and the memory limit is " + mib(o.memory_limit) +
                              ", of which " + mib(used) + " are held by models in use or pinned (" + quoted_list(busy) +
                              "); retry when one is idle",
                          "model");
        }
        ++core_->counters.load_failures;
        break;
      }
      ++core_->counters.unloads_evicted;
      lines.push_back("unloaded model " + quote_excerpt(victim_id) + " to make room for " + quote_excerpt(id));
      evicted.push_back(std::move(victim->model));
      core_->slots.erase(victim_id);
    }
  }
  evicted.clear();
  for (const auto& line : lines) core_->log(line);
  if (refusal) {
    core_->log(refusal->what());
    return fail(take_waiters(), std::make_exception_ptr(*refusal));
  }

  core_->log("loading model " + quote_excerpt(id) + " (" + entry.path + ", about " + mib(need) + ")");
  std::unique_ptr<ServedModel> model;
  std::exception_ptr error;
  try {
    model = loader_(entry);
  } catch (const ModelUnavailable&) {
    error = std::current_exception();
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(
        ModelUnavailable(500, "model_load_failed", "model " + quote_excerpt(id) + " could not be loaded: " + e.what(), "model"));
  } catch (...) {
    error = std::make_exception_ptr(
        ModelUnavailable(500, "model_load_failed", "model " + quote_excerpt(id) + " could not be loaded", "model"));
  }

  std::vector<std::pair<std::optional<milliseconds>, Ready>> waiters;
  std::vector<LeasePtr> leases;
  std::string summary;
  {
    std::lock_guard lock(core_->mu);
    auto it = core_->slots.find(id);
    if (!error && core_->stopping) {
      error = std::make_exception_ptr(ModelUnavailable(503, "server_shutdown", "the server is shutting down"));
    }
    if (it == core_->slots.end()) return;  // stop() failed its waiters already
    waiters = std::move(it->second.waiters);
    if (error) {
      ++core_->counters.load_failures;
      core_->slots.erase(it);
    } else {
      model->id = id;
      summary = model->summary;
      if (model->account_bytes == 0) model->account_bytes = need;  // the loader knows better when it says
      Core::Slot& s = it->second;
      s.model = std::shared_ptr<ServedModel>(std::move(model));
      ++core_->counters.loads;
      for (const auto& w : waiters) leases.push_back(core_->lease_locked(core_, s, w.first));
      if (waiters.empty()) s.expires = core_->expiry_locked(s, std::nullopt);
    }
  }
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      core_->log(e.what());
    }
    return fail(std::move(waiters), error);
  }
  core_->log("loaded model " + quote_excerpt(id) + (summary.empty() ? "" : " (" + summary + ")"));
  for (size_t i = 0; i < waiters.size(); ++i) waiters[i].second(std::move(leases[i]), nullptr);
}

ModelRegistry::UnloadResult ModelRegistry::unload(std::string_view id) {
  {
    std::lock_guard lock(core_->mu);
    auto it = core_->slots.find(id);
    if (it == core_->slots.end()) return UnloadResult::NotLoaded;
    Core::Slot& s = it->second;
    if (!s.model || s.leases > 0) {
      // Loading or in use: it goes as soon as its last request ends.
      s.unload_requested = true;
      return UnloadResult::WhenIdle;
    }
    ++core_->counters.unloads_requested;
    core_->graveyard.push_back(std::move(s.model));
    core_->slots.erase(it);
  }
  core_->cv.notify_all();
  core_->log("unloaded model " + quote_excerpt(id) + " (asked to)");
  return UnloadResult::Unloaded;
}

size_t ModelRegistry::unload_idle(const std::string& reason) {
  std::vector<std::string> gone;
  {
    std::lock_guard lock(core_->mu);
    for (auto it = core_->slots.begin(); it != core_->slots.end();) {
      const Core::Slot& s = it->second;
      if (s.model && s.leases == 0 && !s.entry.pinned) {
        gone.push_back(it->first);
        core_->graveyard.push_back(s.model);
        it = core_->slots.erase(it);
        ++core_->counters.unloads_pressure;
      } else {
        ++it;
      }
    }
  }
  core_->cv.notify_all();
  for (const auto& id : gone) core_->log("unloaded idle model " + quote_excerpt(id) + " (" + reason + ")");
  return gone.size();
}

std::vector<ModelStatus> ModelRegistry::status() {
  std::vector<ModelEntry> entries = catalog_->entries();
  std::lock_guard lock(core_->mu);
  // Loaded models that are not (or no longer) in the catalog are listed too: they answer.
  for (const auto& slot : core_->slots) {
    const std::string& id = slot.first;  // not a structured binding: clang 14 cannot capture those
    const bool listed = std::any_of(entries.begin(), entries.end(), [&](const ModelEntry& e) { return e.id == id; });
    if (!listed) entries.push_back(slot.second.entry);
  }
  std::sort(entries.begin(), entries.end(), [](const ModelEntry& a, const ModelEntry& b) { return a.id < b.id; });
  std::vector<ModelStatus> out;
  const auto now = Clock::now();
  for (ModelEntry& e : entries) {
    ModelStatus st;
    if (auto it = core_->slots.find(e.id); it != core_->slots.end()) {
      const Core::Slot& s = it->second;
      st.loaded = s.model != nullptr;
      st.loading = !st.loaded;
      st.active = s.leases;
      if (s.model) st.account_bytes = s.model->account_bytes;
      if (s.model && s.leases == 0 && s.expires != Clock::time_point::max()) {
        st.unloads_in = std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(s.expires - now));
      }
      e.pinned = e.pinned || s.entry.pinned;
    }
    st.entry = std::move(e);
    out.push_back(std::move(st));
  }
  return out;
}

RegistryCounters ModelRegistry::counters() {
  std::lock_guard lock(core_->mu);
  RegistryCounters c = core_->counters;
  c.loaded = 0;
  c.account_bytes = 0;
  for (const auto& [id, s] : core_->slots) {
    if (!s.model) continue;
    ++c.loaded;
    c.account_bytes += s.model->account_bytes;
  }
  return c;
}

LeasePtr ModelRegistry::peek() {
  const std::optional<std::string> def = default_id();
  std::lock_guard lock(core_->mu);
  const Core::Slot* best = nullptr;
  for (const auto& [id, s] : core_->slots) {
    if (!s.model) continue;
    if (def && id == *def) {
      best = &s;
      break;
    }
    if (!best || s.last_used > best->last_used) best = &s;
  }
  if (!best) return nullptr;
  return LeasePtr(new ModelLease(core_, best->model, std::nullopt, false));
}

void ModelRegistry::stop() {
  std::vector<std::pair<std::optional<milliseconds>, Ready>> waiting;
  std::vector<std::shared_ptr<ServedModel>> loaded;
  {
    std::lock_guard lock(core_->mu);
    // Once only: an engine attached from outside may be gone by a second call (the destructor's).
    if (core_->stopping) return;
    core_->stopping = true;
    core_->load_queue.clear();
    for (auto it = core_->slots.begin(); it != core_->slots.end();) {
      if (it->second.model) {
        loaded.push_back(it->second.model);
        ++it;
      } else if (it->second.waiters.empty()) {
        ++it;  // being loaded by the thread: it fails it when the load returns
      } else {
        for (auto& w : it->second.waiters) waiting.push_back(std::move(w));
        it->second.waiters.clear();
        ++it;
      }
    }
  }
  core_->cv.notify_all();
  fail(std::move(waiting),
       std::make_exception_ptr(ModelUnavailable(503, "server_shutdown", "the server is shutting down")));
  if (thread_.joinable()) thread_.join();
  for (const auto& m : loaded) {
    if (m->engine) m->engine->stop();
  }
}

}  // namespace ember::server
