#include "server/serve_config.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string_view>

#include "core/cache/budget_planner.h"
#include "core/chat/chat_template.h"
#include "io/io_backend.h"
#include "server/keep_alive.h"
#include "server/listen_spec.h"

namespace ember::server {
namespace {

using nlohmann::json;

// A value the setting cannot take; the caller adds where it came from and which key it was for.
struct BadValue : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// How an environment variable's text becomes JSON for the setting's own parser.
enum class Kind { Int, Number, Bool, BoolOrAuto, String, StringList, Object };

std::string shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

int64_t int_in(const json& v, int64_t lo, int64_t hi) {
  const std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  if (!v.is_number_integer()) throw BadValue("must be " + range + ", got " + shown(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw BadValue("must be " + range + ", got " + shown(v));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) throw BadValue("must be " + range + ", got " + shown(v));
  return x;
}

bool boolean(const json& v) {
  if (!v.is_boolean()) throw BadValue("must be true or false, got " + shown(v));
  return v.get<bool>();
}

// true, false, or "auto" (nullopt: the default the engine picks).
std::optional<bool> boolean_or_auto(const json& v) {
  if (v.is_string() && v.get<std::string>() == "auto") return std::nullopt;
  if (!v.is_boolean()) throw BadValue("must be true, false or \"auto\", got " + shown(v));
  return v.get<bool>();
}

bool has_space_or_control(const std::string& s) {
  for (unsigned char c : s)
    if (c <= 0x20 || c == 0x7f) return true;
  return false;
}

std::string string_value(const json& v) {
  if (!v.is_string()) throw BadValue("must be a string, got " + shown(v));
  return v.get<std::string>();
}

// A non-empty string without spaces or control characters (names, keys, addresses).
std::string token(const json& v, const char* what) {
  std::string s = string_value(v);
  if (s.empty()) throw BadValue(std::string("must be a non-empty ") + what);
  if (has_space_or_control(s)) throw BadValue(std::string("must be a ") + what + " without spaces, got " + shown(v));
  return s;
}

template <class Check>
std::vector<std::string> string_list(const json& v, Check check) {
  if (!v.is_array()) throw BadValue("must be an array of strings, got " + shown(v));
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    try {
      out.push_back(check(v[i]));
    } catch (const BadValue& e) {
      throw BadValue("item " + std::to_string(i) + " " + e.what());
    }
  }
  return out;
}

// A finite number (integers are fine: 1 means 1.0).
double number_value(const json& v) {
  if (!v.is_number()) throw BadValue("must be a number, got " + shown(v));
  const double x = v.get<double>();
  if (!std::isfinite(x)) throw BadValue("must be a finite number, got " + shown(v));
  return x;
}

std::string sparse_mode_value(const json& v) {
  std::string s = string_value(v);
  SparseOptions::Mode mode;
  if (!parse_sparse_mode(s.c_str(), &mode))  // core's parser: exactly the names the engine knows
    throw BadValue("must be one of " + sparse_mode_names() + ", got " + shown(v));
  return s;
}

double sparsity_value(const json& v) {
  const double x = number_value(v);
  if (x < 0.0 || x > kMaxTargetSparsity) throw BadValue("must be from 0 (off) to 0.99, got " + shown(v));
  return x;
}

json optional_number(double x) { return std::isnan(x) ? json(nullptr) : json(x); }

// "" (all in RAM), a size or a percentage: core's parser, with a stand-in file size (the real one
// is known only when the model is opened, where a percentage is resolved again).
std::string memory_budget_value(const json& v) {
  std::string s = string_value(v);
  if (s.empty()) return s;
  try {
    cache::parse_memory_budget(s, uint64_t{1} << 40);
  } catch (const std::invalid_argument& e) {
    throw BadValue("must be empty (all in RAM), a size like \"2G\" or \"512M\", or a percentage of the model "
                   "file like \"50%\": " + std::string(e.what()));
  }
  return s;
}

// The daemon's total for every loaded model: a size only (a percentage of which file?).
std::string memory_limit_value(const json& v) {
  std::string s = string_value(v);
  if (s.empty()) return s;
  if (s.find('%') != std::string::npos) throw BadValue("must be a size like \"8G\" (not a percentage), got " + shown(v));
  try {
    cache::parse_memory_budget(s, uint64_t{1} << 40);
  } catch (const std::invalid_argument& e) {
    throw BadValue("must be empty (no limit) or a size like \"8G\" or \"512M\": " + std::string(e.what()));
  }
  return s;
}

std::chrono::milliseconds keep_alive_value(const json& v) {
  try {
    return parse_keep_alive(v);
  } catch (const std::invalid_argument& e) {
    throw BadValue(e.what());
  }
}

std::string chat_template_value(const json& v);

// models.entries: {"<id>": "/path/to/file.gguf"} or {"<id>": {"path": ..., "chat_template": ...,
// "ctx_size": ..., "memory_budget": ...}}; the per-model keys take the server-wide values' checks.
std::vector<ModelEntry> model_entries_value(const json& v) {
  if (!v.is_object()) throw BadValue("must be an object of model id -> file or {\"path\": ...}, got " + shown(v));
  std::vector<ModelEntry> out;
  for (const auto& [id, body] : v.items()) {
    const std::string where = shown(json(id));
    if (!valid_model_id(id))
      throw BadValue("id " + where + " is not a model id (1-128 of A-Z a-z 0-9 . _ : -, not starting with '.')");
    ModelEntry e;
    e.id = id;
    if (body.is_string()) {
      e.path = body.get<std::string>();
    } else if (body.is_object()) {
      for (const auto& [key, value] : body.items()) {
        try {
          if (key == "path") e.path = string_value(value);
          else if (key == "chat_template") e.overrides.chat_template = chat_template_value(value);
          else if (key == "ctx_size") e.overrides.ctx_size = int_in(value, 0, int64_t{1} << 24);
          else if (key == "memory_budget") e.overrides.memory_budget = memory_budget_value(value);
          else throw BadValue("is not a key of an entry (path, chat_template, ctx_size, memory_budget)");
        } catch (const BadValue& bad) {
          throw BadValue(where + " " + shown(json(key)) + " " + bad.what());
        }
      }
    } else {
      throw BadValue(where + " must be a file path or an object with \"path\", got " + shown(body));
    }
    if (e.path.empty()) throw BadValue(where + " names no file (\"path\")");
    out.push_back(std::move(e));
  }
  return out;
}

json model_entries_json(const std::vector<ModelEntry>& entries) {
  json out = json::object();
  for (const ModelEntry& e : entries) {
    out[e.id] = json{{"path", e.path},
                     {"chat_template", e.overrides.chat_template},
                     {"ctx_size", e.overrides.ctx_size < 0 ? 0 : e.overrides.ctx_size},
                     {"memory_budget", e.overrides.memory_budget}};
  }
  return out;
}

std::string io_backend_value(const json& v) {
  std::string s = string_value(v);
  io::IoBackend backend;
  if (!io::parse_io_backend(s, &backend)) throw BadValue("must be one of auto, uring, pread, got " + shown(v));
  return s;
}

std::optional<std::string> activation_state_value(const json& v) {
  if (v.is_null()) return std::nullopt;
  return string_value(v);
}

std::string chat_template_value(const json& v) {
  std::string s = string_value(v);
  if (!s.empty() && !parse_chat_template_name(s))
    throw BadValue("must be empty (recognise from the model) or one of " + chat_template_names() + ", got " +
                   shown(v));
  return s;
}

std::string listen_value(const json& v) {
  const std::string s = string_value(v);
  try {
    parse_listen_spec(s);  // the server's own parser, so the config accepts exactly what it binds
  } catch (const std::invalid_argument& e) {
    throw BadValue(std::string("is not valid: ") + e.what());
  }
  return s;
}

std::string origin_value(const json& v) {
  std::string s = token(v, "origin");
  // A browser's Origin header is scheme://host[:port], never with a path; a trailing slash
  // would silently never match.
  if (s != "*" && (s.find("://") == std::string::npos || s.back() == '/'))
    throw BadValue("must be \"*\" or an origin like \"http://localhost:3000\" (no path), got " + shown(v));
  return s;
}

std::string host_name_value(const json& v) {
  std::string s = token(v, "host name");
  if (s.find('/') != std::string::npos) throw BadValue("must be a host name, got " + shown(v));
  return s;
}

std::string api_key_value(const json& v) { return token(v, "API key"); }

std::chrono::seconds seconds_in(const json& v, int64_t lo, int64_t hi) {
  return std::chrono::seconds(int_in(v, lo, hi));
}

json masked(const std::vector<std::string>& keys) { return json(std::vector<std::string>(keys.size(), "***")); }

constexpr int64_t kKiB = 1024, kMiB = 1024 * kKiB, kGiB = 1024 * kMiB;
constexpr int64_t kDay = 24 * 3600;

struct Setting {
  const char* section;
  const char* key;
  const char* env;  // nullptr: no environment variable
  Kind kind;
  void (*set)(ServeConfig&, const json&);
  json (*get)(const ServeConfig&);
};

// The one list of settings: the file keys, the environment variables and --print-config all come
// from here, so they cannot disagree. Ranges are what is sane for a daemon, not what the type holds.
constexpr Setting kSettings[] = {
    // model
    {"model", "path", "EMBER_MODEL", Kind::String,
     [](ServeConfig& c, const json& v) { c.model_path = string_value(v); },
     [](const ServeConfig& c) -> json { return c.model_path; }},
    {"model", "alias", "EMBER_ALIAS", Kind::String,
     [](ServeConfig& c, const json& v) {
       c.alias = string_value(v);
       if (has_space_or_control(c.alias)) throw BadValue("must be a model id without spaces, got " + shown(v));
     },
     [](const ServeConfig& c) -> json { return c.alias; }},
    {"model", "threads", "EMBER_THREADS", Kind::Int,
     [](ServeConfig& c, const json& v) { c.threads = int(int_in(v, 0, 1024)); },
     [](const ServeConfig& c) -> json { return c.threads; }},
    {"model", "ctx_size", "EMBER_CTX_SIZE", Kind::Int,
     [](ServeConfig& c, const json& v) { c.ctx_size = int_in(v, 0, int64_t{1} << 24); },
     [](const ServeConfig& c) -> json { return c.ctx_size; }},
    {"model", "batch_size", "EMBER_BATCH_SIZE", Kind::Int,
     [](ServeConfig& c, const json& v) { c.batch = int_in(v, 1, int64_t{1} << 16); },
     [](const ServeConfig& c) -> json { return c.batch; }},
    {"model", "mmap", "EMBER_MMAP", Kind::Bool, [](ServeConfig& c, const json& v) { c.mmap = boolean(v); },
     [](const ServeConfig& c) -> json { return c.mmap; }},
    {"model", "repack", "EMBER_REPACK", Kind::Bool, [](ServeConfig& c, const json& v) { c.repack = boolean(v); },
     [](const ServeConfig& c) -> json { return c.repack; }},
    {"model", "chat_template", "EMBER_CHAT_TEMPLATE", Kind::String,
     [](ServeConfig& c, const json& v) { c.server.chat_template = chat_template_value(v); },
     [](const ServeConfig& c) -> json { return c.server.chat_template; }},
    // engine
    {"engine", "queue", "EMBER_QUEUE", Kind::Int,
     [](ServeConfig& c, const json& v) { c.queue = size_t(int_in(v, 1, int64_t{1} << 16)); },
     [](const ServeConfig& c) -> json { return c.queue; }},
    {"engine", "parallel", "EMBER_PARALLEL", Kind::Int,
     [](ServeConfig& c, const json& v) { c.slots = int(int_in(v, 1, 256)); },
     [](const ServeConfig& c) -> json { return c.slots; }},
    {"engine", "prefix_reuse", "EMBER_PREFIX_REUSE", Kind::Bool,
     [](ServeConfig& c, const json& v) { c.reuse_prefix = boolean(v); },
     [](const ServeConfig& c) -> json { return c.reuse_prefix; }},
    // sparse FFN of decode steps
    {"sparse", "mode", "EMBER_SPARSE", Kind::String,
     [](ServeConfig& c, const json& v) { c.sparse_mode = sparse_mode_value(v); },
     [](const ServeConfig& c) -> json { return c.sparse_mode; }},
    {"sparse", "threshold", "EMBER_SPARSE_THRESHOLD", Kind::Number,
     [](ServeConfig& c, const json& v) {
       c.sparse_threshold = v.is_null() ? std::numeric_limits<double>::quiet_NaN() : number_value(v);
     },
     [](const ServeConfig& c) -> json { return optional_number(c.sparse_threshold); }},
    {"sparse", "sparsity", "EMBER_SPARSITY", Kind::Number,
     [](ServeConfig& c, const json& v) { c.sparsity = sparsity_value(v); },
     [](const ServeConfig& c) -> json { return c.sparsity; }},
    {"sparse", "profile", "EMBER_SPARSE_PROFILE", Kind::String,
     [](ServeConfig& c, const json& v) { c.sparse_profile = string_value(v); },
     [](const ServeConfig& c) -> json { return c.sparse_profile; }},
    {"sparse", "stats", "EMBER_SPARSE_STATS", Kind::Bool,
     [](ServeConfig& c, const json& v) { c.sparse_stats = boolean(v); },
     [](const ServeConfig& c) -> json { return c.sparse_stats; }},
    // memory budget (neuron-bundle packs)
    {"memory", "budget", "EMBER_MEMORY_BUDGET", Kind::String,
     [](ServeConfig& c, const json& v) { c.memory_budget = memory_budget_value(v); },
     [](const ServeConfig& c) -> json { return c.memory_budget; }},
    {"memory", "io_backend", "EMBER_IO_BACKEND", Kind::String,
     [](ServeConfig& c, const json& v) { c.io_backend = io_backend_value(v); },
     [](const ServeConfig& c) -> json { return c.io_backend; }},
    {"memory", "prefetch", "EMBER_PREFETCH", Kind::BoolOrAuto,
     [](ServeConfig& c, const json& v) { c.prefetch = boolean_or_auto(v); },
     [](const ServeConfig& c) -> json { return c.prefetch ? json(*c.prefetch) : json("auto"); }},
    {"memory", "activation_state", "EMBER_ACTIVATION_STATE", Kind::String,
     [](ServeConfig& c, const json& v) { c.activation_state = activation_state_value(v); },
     [](const ServeConfig& c) -> json { return c.activation_state ? json(*c.activation_state) : json(nullptr); }},
    {"memory", "replan_tokens", "EMBER_REPLAN_TOKENS", Kind::Int,
     [](ServeConfig& c, const json& v) { c.replan_tokens = int_in(v, 0, int64_t{1} << 40); },
     [](const ServeConfig& c) -> json { return c.replan_tokens; }},
    {"memory", "pressure", "EMBER_MEMORY_PRESSURE", Kind::Bool,
     [](ServeConfig& c, const json& v) { c.memory_pressure = boolean(v); },
     [](const ServeConfig& c) -> json { return c.memory_pressure; }},
    {"memory", "limit", "EMBER_MEMORY_LIMIT", Kind::String,
     [](ServeConfig& c, const json& v) { c.memory_limit = memory_limit_value(v); },
     [](const ServeConfig& c) -> json { return c.memory_limit; }},
    // models
    {"models", "dir", "EMBER_MODELS_DIR", Kind::String,
     [](ServeConfig& c, const json& v) { c.models_dir = string_value(v); },
     [](const ServeConfig& c) -> json { return c.models_dir; }},
    {"models", "max_loaded", "EMBER_MAX_LOADED_MODELS", Kind::Int,
     [](ServeConfig& c, const json& v) { c.max_loaded_models = int_in(v, 1, 64); },
     [](const ServeConfig& c) -> json { return c.max_loaded_models; }},
    {"models", "keep_alive", "EMBER_KEEP_ALIVE", Kind::String,
     [](ServeConfig& c, const json& v) { c.keep_alive = keep_alive_value(v); },
     [](const ServeConfig& c) -> json { return keep_alive_text(c.keep_alive); }},
    {"models", "entries", nullptr, Kind::Object,
     [](ServeConfig& c, const json& v) { c.model_entries = model_entries_value(v); },
     [](const ServeConfig& c) -> json { return model_entries_json(c.model_entries); }},
    // server
    {"server", "host", "EMBER_HOST", Kind::String,
     [](ServeConfig& c, const json& v) { c.server.host = token(v, "address"); },
     [](const ServeConfig& c) -> json { return c.server.host; }},
    {"server", "port", "EMBER_PORT", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.port = uint16_t(int_in(v, 0, 65535)); },
     [](const ServeConfig& c) -> json { return c.server.port; }},
    {"server", "tcp", "EMBER_TCP", Kind::Bool, [](ServeConfig& c, const json& v) { c.server.tcp = boolean(v); },
     [](const ServeConfig& c) -> json { return c.server.tcp; }},
    {"server", "listen", "EMBER_LISTEN", Kind::StringList,
     [](ServeConfig& c, const json& v) { c.server.listen = string_list(v, listen_value); },
     [](const ServeConfig& c) -> json { return c.server.listen; }},
    {"server", "io_threads", "EMBER_IO_THREADS", Kind::Int,
     [](ServeConfig& c, const json& v) { c.io_threads = int(int_in(v, 1, 64)); },
     [](const ServeConfig& c) -> json { return c.io_threads; }},
    {"server", "max_body_bytes", "EMBER_MAX_BODY_BYTES", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.max_body_bytes = size_t(int_in(v, kKiB, kGiB)); },
     [](const ServeConfig& c) -> json { return c.server.max_body_bytes; }},
    {"server", "max_header_bytes", "EMBER_MAX_HEADER_BYTES", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.max_header_bytes = size_t(int_in(v, kKiB, kMiB)); },
     [](const ServeConfig& c) -> json { return c.server.max_header_bytes; }},
    {"server", "io_timeout_seconds", "EMBER_IO_TIMEOUT", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.io_timeout = seconds_in(v, 1, kDay); },
     [](const ServeConfig& c) -> json { return c.server.io_timeout.count(); }},
    {"server", "request_timeout_seconds", "EMBER_REQUEST_TIMEOUT", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.request_timeout = seconds_in(v, 1, 7 * kDay); },
     [](const ServeConfig& c) -> json { return c.server.request_timeout.count(); }},
    {"server", "keepalive_interval_seconds", "EMBER_KEEPALIVE_INTERVAL", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.keepalive_interval = seconds_in(v, 1, 3600); },
     [](const ServeConfig& c) -> json { return c.server.keepalive_interval.count(); }},
    {"server", "max_stream_backlog_bytes", "EMBER_MAX_STREAM_BACKLOG_BYTES", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.max_stream_backlog_bytes = size_t(int_in(v, 4 * kKiB, kGiB)); },
     [](const ServeConfig& c) -> json { return c.server.max_stream_backlog_bytes; }},
    {"server", "shutdown_grace_seconds", "EMBER_SHUTDOWN_GRACE", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.shutdown_grace = seconds_in(v, 0, 3600); },
     [](const ServeConfig& c) -> json { return c.server.shutdown_grace.count(); }},
    // limits (per request)
    {"limits", "max_tokens", "EMBER_MAX_TOKENS", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.limits.max_tokens = int_in(v, 1, int64_t{1} << 24); },
     [](const ServeConfig& c) -> json { return c.server.limits.max_tokens; }},
    {"limits", "max_prompt_bytes", "EMBER_MAX_PROMPT_BYTES", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.limits.max_prompt_bytes = size_t(int_in(v, 1, kGiB)); },
     [](const ServeConfig& c) -> json { return c.server.limits.max_prompt_bytes; }},
    {"limits", "max_messages", "EMBER_MAX_MESSAGES", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.limits.max_messages = size_t(int_in(v, 1, int64_t{1} << 20)); },
     [](const ServeConfig& c) -> json { return c.server.limits.max_messages; }},
    {"limits", "max_stop_strings", "EMBER_MAX_STOP_STRINGS", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.limits.max_stop_strings = size_t(int_in(v, 0, 64)); },
     [](const ServeConfig& c) -> json { return c.server.limits.max_stop_strings; }},
    {"limits", "max_stop_bytes", "EMBER_MAX_STOP_BYTES", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.limits.max_stop_bytes = size_t(int_in(v, 1, 64 * kKiB)); },
     [](const ServeConfig& c) -> json { return c.server.limits.max_stop_bytes; }},
    {"limits", "max_logit_bias", "EMBER_MAX_LOGIT_BIAS", Kind::Int,
     [](ServeConfig& c, const json& v) { c.server.limits.max_logit_bias = size_t(int_in(v, 0, int64_t{1} << 20)); },
     [](const ServeConfig& c) -> json { return c.server.limits.max_logit_bias; }},
    // security
    {"security", "api_keys", "EMBER_API_KEY", Kind::StringList,
     [](ServeConfig& c, const json& v) { c.server.api_keys = string_list(v, api_key_value); },
     [](const ServeConfig& c) -> json { return masked(c.server.api_keys); }},
    {"security", "api_key_file", "EMBER_API_KEY_FILE", Kind::String,
     [](ServeConfig& c, const json& v) { c.api_key_file = string_value(v); },
     [](const ServeConfig& c) -> json { return c.api_key_file; }},
    {"security", "cors_origins", "EMBER_CORS_ORIGINS", Kind::StringList,
     [](ServeConfig& c, const json& v) { c.server.cors_origins = string_list(v, origin_value); },
     [](const ServeConfig& c) -> json { return c.server.cors_origins; }},
    {"security", "allowed_hosts", "EMBER_ALLOWED_HOSTS", Kind::StringList,
     [](ServeConfig& c, const json& v) { c.server.allowed_hosts = string_list(v, host_name_value); },
     [](const ServeConfig& c) -> json { return c.server.allowed_hosts; }},
};

constexpr const char* kSections[] = {"model", "engine", "sparse", "memory", "models", "server", "limits", "security"};

std::string full_key(const Setting& s) { return std::string(s.section) + "." + s.key; }

void apply_one(const Setting& s, ServeConfig& config, const json& value, const std::string& source) {
  try {
    s.set(config, value);
  } catch (const BadValue& e) {
    throw std::runtime_error(source + ": " + full_key(s) + " " + e.what());
  }
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r' || s[b] == '\n')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r' || s[e - 1] == '\n')) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return s;
}

// An environment variable's text as the JSON value the setting parses, so both sources share
// one set of checks.
json env_value(Kind kind, const std::string& text) {
  switch (kind) {
    case Kind::String:
      return text;
    case Kind::Int: {
      const std::string t = trim(text);
      int64_t x = 0;
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
      if (t.empty() || ec != std::errc() || end != t.data() + t.size())
        throw BadValue("must be an integer, got \"" + text + "\"");
      return x;
    }
    case Kind::Number: {
      const std::string t = trim(text);
      char* end = nullptr;
      errno = 0;
      const double x = t.empty() ? 0.0 : std::strtod(t.c_str(), &end);
      if (t.empty() || errno == ERANGE || end != t.c_str() + t.size() || !std::isfinite(x))
        throw BadValue("must be a number, got \"" + text + "\"");
      return x;
    }
    case Kind::Bool:
    case Kind::BoolOrAuto: {
      const std::string t = lower(trim(text));
      if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
      if (t == "0" || t == "false" || t == "no" || t == "off") return false;
      if (kind == Kind::BoolOrAuto && t == "auto") return "auto";
      throw BadValue(std::string("must be 1/0, true/false, yes/no or on/off") +
                     (kind == Kind::BoolOrAuto ? " or auto" : "") + ", got \"" + text + "\"");
    }
    case Kind::Object:  // no environment variable (a table does not fit in one)
      return nullptr;
    case Kind::StringList: {
      json list = json::array();
      std::string_view rest = text;
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        const std::string item = trim(rest.substr(0, comma));
        if (!item.empty()) list.push_back(item);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      // "," or " , " is a mistake, never a way to say "none": for EMBER_API_KEY it would switch
      // authentication off and replace the config file's keys. (Unset or empty: not applied.)
      if (list.empty()) throw BadValue("lists nothing (only commas and spaces), got \"" + text + "\"");
      return list;
    }
  }
  return nullptr;
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; the rest is the useful part.
std::string without_json_prefix(const std::string& what) {
  if (!what.empty() && what[0] == '[') {
    const size_t close = what.find("] ");
    if (close != std::string::npos) return what.substr(close + 2);
  }
  return what;
}

}  // namespace

void apply_config_json(ServeConfig& config, const json& document, const std::string& source) {
  if (!document.is_object()) throw std::runtime_error(source + ": must be a JSON object of sections, got " + shown(document));
  for (const auto& [section, body] : document.items()) {
    bool known_section = false;
    for (const char* s : kSections) known_section = known_section || section == s;
    if (!known_section)
      throw std::runtime_error(source + ": unknown section \"" + section +
                               "\" (sections: model, engine, sparse, memory, models, server, limits, security)");
    if (!body.is_object()) throw std::runtime_error(source + ": " + section + " must be an object, got " + shown(body));
    for (const auto& [key, value] : body.items()) {
      const Setting* found = nullptr;
      const Setting* elsewhere = nullptr;
      for (const Setting& s : kSettings) {
        if (key != s.key) continue;
        if (section == s.section) found = &s;
        else elsewhere = &s;
      }
      if (!found) {
        std::string message = source + ": unknown key \"" + section + "." + key + "\"";
        if (elsewhere) message += " (did you mean \"" + full_key(*elsewhere) + "\"?)";
        throw std::runtime_error(message);
      }
      apply_one(*found, config, value, source);
    }
  }
}

void load_config_file(ServeConfig& config, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read config file " + path + ": " + std::strerror(errno));
  // A config file is small; a huge one is a mistake (or a device file), not something to slurp.
  constexpr std::streamsize kMaxBytes = 4 * kMiB;
  std::string text;
  text.resize(size_t(kMaxBytes) + 1);
  in.read(text.data(), kMaxBytes + 1);
  if (in.bad()) throw std::runtime_error("cannot read config file " + path + ": " + std::strerror(errno));
  text.resize(size_t(in.gcount()));
  if (text.size() > size_t(kMaxBytes)) throw std::runtime_error("config file " + path + " is larger than 4 MiB");
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& e) {
    throw std::runtime_error("config file " + path + " is not valid JSON: " + without_json_prefix(e.what()));
  }
  apply_config_json(config, document, "config file " + path);
}

std::optional<std::string> config_file_from_environment(const GetEnv& getenv) {
  const char* v = getenv("EMBER_CONFIG");
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

void apply_environment(ServeConfig& config, const GetEnv& getenv) {
  for (const Setting& s : kSettings) {
    if (!s.env) continue;
    const char* v = getenv(s.env);
    if (!v || !*v) continue;  // unset and empty are the same: a shell's `VAR= cmd` must not matter
    json value;
    try {
      value = env_value(s.kind, v);
    } catch (const BadValue& e) {
      throw std::runtime_error(std::string("environment variable ") + s.env + " (" + full_key(s) + ") " + e.what());
    }
    apply_one(s, config, value, std::string("environment variable ") + s.env);
  }
}

void check_config(const ServeConfig& config) {
  try {
    listen_specs(config.server);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  sparse_options(config);
}

SparseSettings sparse_settings(const ServeConfig& config) {
  SparseSettings s;
  s.mode = config.sparse_mode;
  s.threshold = config.sparse_threshold;
  s.sparsity = config.sparsity > 0.0 ? config.sparsity : -1.0;  // 0 is "off", not "skip nothing"
  s.diagnostics = config.sparse_stats;
  s.profile = !config.sparse_profile.empty();
  return s;
}

SparseOptions sparse_options(const ServeConfig& config) {
  try {
    return resolve_sparse_settings(sparse_settings(config),
                                   {"sparse.mode", "sparse.threshold", "sparse.sparsity", "sparse.profile"});
  } catch (const SparseSettingsError& e) {
    throw std::runtime_error("sparse settings: " + e.setting + " " + e.what());
  }
}

std::string activation_state_path(const ServeConfig& config, const std::string& model_path, const GetEnv& getenv) {
  if (config.activation_state) return *config.activation_state;
  auto set = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    return v ? std::string(v) : std::string();
  };
  std::filesystem::path dir;
  // systemd's StateDirectory= may list several, colon-separated: the first is the daemon's own.
  if (std::string s = set("STATE_DIRECTORY"); !s.empty()) {
    dir = s.substr(0, s.find(':'));
  } else if (std::string x = set("XDG_STATE_HOME"); !x.empty()) {
    dir = std::filesystem::path(x) / "ember";
  } else if (std::string h = set("HOME"); !h.empty()) {
    dir = std::filesystem::path(h) / ".local" / "state" / "ember";
  } else {
    return "";
  }
  return (dir / (std::filesystem::path(model_path).filename().string() + ".activations")).string();
}

nlohmann::ordered_json to_json(const ServeConfig& config) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const char* section : kSections) out[section] = json::object();
  for (const Setting& s : kSettings) out[s.section][s.key] = s.get(config);
  return out;
}

std::vector<std::string> read_api_key_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read API key file " + path + ": " + std::strerror(errno));
  std::vector<std::string> keys;
  std::string line;
  size_t line_no = 0;
  size_t bytes = 0;
  while (std::getline(in, line)) {
    ++line_no;
    bytes += line.size() + 1;
    if (bytes > size_t(kMiB)) throw std::runtime_error("API key file " + path + " is larger than 1 MiB");
    const std::string key = trim(line);
    if (key.empty() || key[0] == '#') continue;
    // Never echo the line: it is probably a secret.
    if (has_space_or_control(key))
      throw std::runtime_error("API key file " + path + ": line " + std::to_string(line_no) +
                               " contains whitespace or control characters (one key per line)");
    keys.push_back(key);
  }
  if (in.bad()) throw std::runtime_error("cannot read API key file " + path + ": " + std::strerror(errno));
  if (keys.empty()) throw std::runtime_error("API key file " + path + " contains no keys");
  return keys;
}

std::vector<std::string> effective_api_keys(const ServeConfig& config) {
  std::vector<std::string> keys = config.server.api_keys;
  if (!config.api_key_file.empty()) {
    std::vector<std::string> from_file = read_api_key_file(config.api_key_file);
    keys.insert(keys.end(), from_file.begin(), from_file.end());
  }
  return keys;
}

std::vector<SettingName> setting_names() {
  std::vector<SettingName> out;
  for (const Setting& s : kSettings) out.push_back({full_key(s), s.env ? s.env : ""});
  return out;
}

}  // namespace ember::server
