#include "tests/support/fixtures.h"

#include <cstdio>
#include <cstdlib>

namespace ember::test {

std::filesystem::path source_dir() { return EMBER_SOURCE_DIR; }

int& skip_count() {  // read by test_main.cpp; a test binary is single-threaded here
  static int count = 0;
  return count;
}

std::optional<std::filesystem::path> fixtures_dir() {
  if (const char* env = std::getenv("EMBER_FIXTURES"); env && *env) {
    std::filesystem::path p(env);
    if (std::filesystem::is_directory(p)) return p;
    return std::nullopt;
  }
  std::filesystem::path p = std::filesystem::path(EMBER_SOURCE_DIR) / ".." / "shared" / "fixtures";
  if (std::filesystem::is_directory(p)) return std::filesystem::canonical(p);
  return std::nullopt;
}

void skip(const std::string& what) {
  ++skip_count();
  std::printf("SKIPPED: %s (fixtures not found: set EMBER_FIXTURES or place them at ../shared/fixtures)\n",
              what.c_str());
  std::fflush(stdout);
}

std::optional<std::filesystem::path> fixture(const std::string& relative) {
  auto dir = fixtures_dir();
  if (!dir) {
    skip(relative);
    return std::nullopt;
  }
  return *dir / relative;
}

}  // namespace ember::test
