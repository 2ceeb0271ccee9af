#pragma once
// Request accounting for GET /metrics and its Prometheus text rendering (exposition format 0.0.4).
// No HTTP library here: the session reports (endpoint, status) pairs; rendering is a pure function.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "server/engine_worker.h"
#include "server/model_registry.h"

namespace ember::server {

// The fixed set of endpoint labels, so a client cannot grow the metric set by inventing paths.
enum class Endpoint {
  Health, Metrics, Models, Model, ModelUnload, Completions, ChatCompletions, Tokenize, Detokenize, Other
};
inline constexpr int kEndpointCount = 10;

// "/v1/models/abc" -> Model, "/v1/models/abc/unload" -> ModelUnload, "/nowhere" -> Other. `path` excludes the query string.
Endpoint endpoint_of(std::string_view path);
// The label value: "/health", "/v1/models/{id}", ..., "other".
const char* endpoint_label(Endpoint e);

class HttpMetrics {
 public:
  // Counts one answered request. Thread-safe.
  void record(Endpoint endpoint, int status);
  // (endpoint, status) -> count, ordered for stable output.
  std::map<std::pair<int, int>, uint64_t> requests() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<int, int>, uint64_t> requests_;  // keyed by (int(Endpoint), status)
};

// Everything /metrics reports, gathered by the session.
struct MetricsSnapshot {
  std::map<std::pair<int, int>, uint64_t> requests;
  int64_t http_active_requests = 0;
  bool model_loaded = false;
  // The default model's engine when it is loaded, else the most recently used loaded one's
  // (zeros while none is loaded).
  EngineMetrics engine;
  std::optional<RegistryCounters> models;  // once the registry serves
};

// The Prometheus text body: HELP and TYPE lines for every family, then its samples.
std::string render_prometheus(const MetricsSnapshot& m);

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace ember::server
