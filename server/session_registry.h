#pragma once
// The connections of one server, so a graceful stop can end the streams still running after the
// grace period. Free of Asio: a session is anything that can be told to wind down.
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ember::server {

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Called from any thread once the grace period is over: the session must (on its own strand)
  // cancel its generation, end a running stream with a "server_shutdown" error event, answer a
  // waiting non-streaming request with 503, and close the connection.
  virtual void begin_shutdown() = 0;
};

class SessionRegistry {
 public:
  uint64_t add(std::weak_ptr<SessionBase> session) {
    std::lock_guard lock(mu_);
    const uint64_t id = next_id_++;
    sessions_.emplace(id, std::move(session));
    return id;
  }
  void remove(uint64_t id) {
    std::lock_guard lock(mu_);
    sessions_.erase(id);
  }
  // The sessions alive now (locked, so they stay alive while the caller uses them).
  std::vector<std::shared_ptr<SessionBase>> live() const {
    std::lock_guard lock(mu_);
    std::vector<std::shared_ptr<SessionBase>> out;
    out.reserve(sessions_.size());
    for (const auto& [id, weak] : sessions_) {
      if (auto s = weak.lock()) out.push_back(std::move(s));
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::weak_ptr<SessionBase>> sessions_;
};

}  // namespace ember::server
