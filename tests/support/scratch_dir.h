#pragma once
// A private temporary folder per test process ("<prefix>-<pid>" in the system's temp folder),
// created on first use and removed with everything in it when the process exits.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace ember::test {

// One folder per prefix; call it with the same prefix from every test of a binary.
inline const std::filesystem::path& scratch_dir(const char* prefix) {
  struct Dir {
    std::filesystem::path path;
    explicit Dir(const char* p) : path(std::filesystem::temp_directory_path() / (std::string(p) + "-" + std::to_string(::getpid()))) {
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir(prefix);
  return dir.path;
}

}  // namespace ember::test
