#include "server/model_catalog.h"

#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace ember::server {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kModelExtension = ".gguf";

// The file's real path and size when it is a regular file (symlinks followed); nullopt otherwise.
std::optional<std::pair<fs::path, uint64_t>> regular_file(const fs::path& path) {
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  if (ec || !fs::is_regular_file(real, ec) || ec) return std::nullopt;
  const uint64_t size = fs::file_size(real, ec);
  if (ec) return std::nullopt;
  return std::make_pair(real, size);
}

bool inside(const fs::path& real, const fs::path& dir) {
  const fs::path rel = real.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != ".." && rel.is_relative();
}

}  // namespace

bool valid_model_id(std::string_view id) {
  if (id.empty() || id.size() > 128 || id.front() == '.') return false;
  for (const char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

ModelCatalog::ModelCatalog(std::string dir, std::vector<ModelEntry> fixed, Log log) : log_(std::move(log)) {
  if (!dir.empty()) {
    std::error_code ec;
    const fs::path real = fs::canonical(dir, ec);
    if (ec || !fs::is_directory(real)) {
      throw std::runtime_error("models directory " + dir + ": " + (ec ? ec.message() : "not a directory"));
    }
    dir_ = real.string();
  }
  for (ModelEntry& e : fixed) {
    if (!valid_model_id(e.id)) {
      throw std::runtime_error("model id '" + e.id + "' is not a valid id (1-128 of A-Z a-z 0-9 . _ : -, not starting with '.')");
    }
    const auto file = regular_file(e.path);
    if (!file) {
      std::error_code ec;
      const bool exists = fs::exists(e.path, ec);
      throw std::runtime_error("model '" + e.id + "': " + e.path + (exists ? " is not a regular file" : " does not exist"));
    }
    e.path = file->first.string();
    e.file_bytes = file->second;
    const std::string id = e.id;
    if (!fixed_.emplace(id, std::move(e)).second) throw std::runtime_error("model id '" + id + "' is given twice");
  }
  std::lock_guard lock(mu_);
  rescan_locked();
}

void ModelCatalog::rescan_locked() {
  if (dir_.empty()) return;
  std::map<std::string, ModelEntry> found;
  std::error_code ec;
  const fs::path dir(dir_);
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= kModelExtension.size() || !name.ends_with(kModelExtension)) continue;
    const std::string id = name.substr(0, name.size() - kModelExtension.size());
    const auto skip = [&](const std::string& why) {
      if (reported_.insert(name).second) log_("models directory: skipping " + name + ": " + why);
    };
    if (!valid_model_id(id)) {
      skip("its name is not a valid model id");
      continue;
    }
    const auto file = regular_file(it->path());
    if (!file) {
      skip("not a readable regular file");
      continue;
    }
    if (!inside(file->first, dir)) {
      skip("it resolves to " + file->first.string() + ", outside the directory");
      continue;
    }
    found[id] = ModelEntry{id, file->first.string(), file->second, false, false, {}};
  }
  if (ec && reported_.insert("").second) log_("models directory " + dir_ + ": " + ec.message());
  scanned_ = std::move(found);
}

std::optional<ModelEntry> ModelCatalog::find(std::string_view id) {
  if (!valid_model_id(id)) return std::nullopt;  // never a path, whatever the directory holds
  const std::string key(id);
  if (auto it = fixed_.find(key); it != fixed_.end()) return it->second;
  std::lock_guard lock(mu_);
  auto it = scanned_.find(key);
  if (it == scanned_.end()) {
    rescan_locked();
    it = scanned_.find(key);
    if (it == scanned_.end()) return std::nullopt;
  }
  return it->second;
}

std::vector<ModelEntry> ModelCatalog::entries() {
  std::map<std::string, ModelEntry> all;
  {
    std::lock_guard lock(mu_);
    rescan_locked();
    all = scanned_;
  }
  for (const auto& [id, e] : fixed_) all[id] = e;
  std::vector<ModelEntry> out;
  out.reserve(all.size());
  for (auto& [id, e] : all) out.push_back(std::move(e));
  return out;
}

std::optional<ModelEntry> ModelCatalog::default_model() {
  for (const auto& [id, e] : fixed_) {
    if (e.pinned) return e;
  }
  std::vector<ModelEntry> all = entries();
  if (all.size() == 1) return all.front();
  return std::nullopt;
}

}  // namespace ember::server
