#include "core/synth/demo_model.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/synth/synth_writer.h"

namespace ember::synth {

std::string cache_dir() {
  if (const char* e = std::getenv("EMBER_CACHE"); e && *e) return e;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/ember";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/ember";
  return "/tmp/ember-cache";
}

std::string ensure_demo_model(bool* created) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(cache_dir()) / "models";
  // The version suffix changes whenever synth draws different weights, so a stale cached demo
  // model from an older build is never mistaken for the current one.
  const fs::path path = dir / "demo-tiny-Q8_0-v2.gguf";
  if (created) *created = false;
  if (fs::exists(path)) return path.string();
  fs::create_directories(dir);
  // A unique temp name so two processes creating it at once do not write the same file.
  const fs::path tmp = dir / ("demo-tiny-Q8_0-v2.gguf.tmp." + std::to_string(::getpid()));
  SynthOptions o;
  o.preset = "tiny";
  o.type = GgmlType::Q8_0;
  o.output_path = tmp.string();
  o.seed = 1;
  try {
    write_synth_model(o);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  fs::rename(tmp, path);
  if (created) *created = true;
  return path.string();
}

}  // namespace ember::synth
