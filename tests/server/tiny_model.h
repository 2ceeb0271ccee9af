#pragma once
// The tiny synthetic model the daemon's tests run on, written once per test process into a
// private temporary folder that is removed when the process exits.
#include <filesystem>
#include <string>
#include <system_error>
#include <unistd.h>

#include "core/synth/synth_writer.h"

namespace ember::test_server {

inline const std::filesystem::path& test_dir() {
  struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("ember-server-test-" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

inline const std::string& tiny_model_path() {
  static const std::string path = [] {
    synth::SynthOptions o;
    o.preset = "tiny";
    o.type = GgmlType::Q8_0;
    o.output_path = (test_dir() / "tiny.gguf").string();
    o.threads = 2;
    synth::write_synth_model(o);
    return o.output_path;
  }();
  return path;
}

}  // namespace ember::test_server
