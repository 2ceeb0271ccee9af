#pragma once
// The models a daemon may serve, by id: the files of a models directory (`--models-dir`), the
// entries of the config file's `models.entries`, and the `-m` model. A request's model id is only
// ever a key of this catalog, never part of a path: a file is served only when the operator put
// it in the directory or named it in the config. Directory files are `<id>.gguf` whose real path
// (symlinks resolved) stays inside the directory; one that points outside is skipped and said
// once in the log. The directory is listed again when an id is not found and for /v1/models, so a
// model copied there is served without a restart.
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ember::server {

// Per-model settings that differ from the server-wide ones (config `models.entries`).
struct ModelOverrides {
  std::string chat_template;   // a family name; empty: the server's setting
  int64_t ctx_size = -1;       // -1: the server's setting
  std::string memory_budget;   // empty: the server's setting
};

struct ModelEntry {
  std::string id;
  std::string path;           // a regular file when the catalog looked
  uint64_t file_bytes = 0;
  bool pinned = false;        // the -m model: loaded at startup, never unloaded for being idle
  bool demo = false;          // the built-in demo model
  ModelOverrides overrides;
};

// Ids are names, not paths: 1-128 of [A-Za-z0-9._:-], not starting with '.'.
bool valid_model_id(std::string_view id);

class ModelCatalog {
 public:
  using Log = std::function<void(const std::string&)>;
  // `dir`: "" for none (else it must be a directory: throws std::runtime_error naming it).
  // `fixed`: the -m model and the config's entries, each checked now (throws naming the id or
  // file); they win over a directory file of the same id.
  ModelCatalog(std::string dir, std::vector<ModelEntry> fixed, Log log);

  std::optional<ModelEntry> find(std::string_view id);
  std::vector<ModelEntry> entries();  // sorted by id
  // The model a request that names none gets: the pinned one, else the only one; else nullopt.
  std::optional<ModelEntry> default_model();
  const std::string& dir() const { return dir_; }

 private:
  void rescan_locked();

  std::string dir_;  // canonical
  std::map<std::string, ModelEntry> fixed_;
  Log log_;
  std::mutex mu_;
  std::map<std::string, ModelEntry> scanned_;
  std::set<std::string> reported_;  // directory names already said to be skipped
};

}  // namespace ember::server
