#pragma once
// Test files for the io/ tests: random contents in a chosen directory, removed on destruction; the
// directories to try (a real disk, where O_DIRECT should work, and tmpfs); and the io_uring skip.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "io/uring_reader.h"

namespace ember::io_test {

inline std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(rng() & 0xff);
  return s;
}

class TestFile {
 public:
  TestFile(const std::filesystem::path& dir, const std::string& contents) {
    std::string pattern = (dir / "ember_io_test_XXXXXX").string();
    const int fd = ::mkstemp(pattern.data());
    REQUIRE_MESSAGE(fd >= 0, "cannot create a file in " << dir);
    path_ = pattern;
    REQUIRE(::write(fd, contents.data(), contents.size()) == static_cast<ssize_t>(contents.size()));
    ::close(fd);
  }
  ~TestFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TestFile(const TestFile&) = delete;
  TestFile& operator=(const TestFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Beside the test binary: the build directory, on a real disk (temp directories may be tmpfs).
inline std::filesystem::path disk_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) return exe.parent_path();
  return std::filesystem::current_path();
}

// tmpfs where there is one (it refuses O_DIRECT before Linux 6.6, accepts it since).
inline std::filesystem::path shm_dir() {
  return std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                   : std::filesystem::temp_directory_path();
}

// True when io_uring works; otherwise prints the visible "SKIPPED: io_uring unavailable" line.
inline bool uring_available(const char* test) {
  static const std::string reason = io::UringReader::unavailable_reason();
  if (reason.empty()) return true;
  std::printf("SKIPPED: io_uring unavailable: %s (%s)\n", reason.c_str(), test);
  return false;
}

}  // namespace ember::io_test
