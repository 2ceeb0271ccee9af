#include "tests/support/fixtures.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ember::test {

namespace {

int& fixture_cases() {  // incremented during static initialisation, when test cases register
  static int count = 0;
  return count;
}

// A test that reads fixtures without the decorator would run in the entry that must pass without
// them, and break every clone that has none: say so the first time it happens, with fixtures or not.
void require_fixture_suite() {
  const auto* options = doctest::getContextOptions();  // null before main creates the context
  const auto* current = options ? options->currentTest : nullptr;
  if (current && std::strcmp(current->m_test_suite, kFixtureSuite) != 0)
    FAIL_CHECK("this test reads fixtures: declare it TEST_CASE(\"...\" * ember::test::needs_fixtures)");
}

}  // namespace

void NeedsFixtures::fill(doctest::detail::TestCase& state) const {
  state.m_test_suite = kFixtureSuite;
  ++fixture_cases();
}

int fixture_case_count() { return fixture_cases(); }

std::filesystem::path source_dir() { return EMBER_SOURCE_DIR; }

int& skip_count() {  // read by test_main.cpp; a test binary is single-threaded here
  static int count = 0;
  return count;
}

static std::optional<std::filesystem::path> find_fixtures_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("EMBER_FIXTURES"); env && *env) {
    if (fs::is_directory(env)) return fs::path(env);
    return std::nullopt;
  }
  for (const fs::path& p : {fs::path(EMBER_SOURCE_DIR) / ".." / "shared" / "fixtures",
                           fs::path(EMBER_SOURCE_DIR) / "tests" / "fixtures"})
    if (fs::is_directory(p)) return fs::canonical(p);
  return std::nullopt;
}

std::optional<std::filesystem::path> fixtures_dir() {
  require_fixture_suite();
  return find_fixtures_dir();
}

std::string fixtures_searched() {
  if (const char* env = std::getenv("EMBER_FIXTURES"); env && *env)
    return std::string("EMBER_FIXTURES=") + env;
  return "../shared/fixtures and tests/fixtures";
}

void skip(const std::string& what) {
  ++skip_count();
  std::printf("SKIPPED: %s (set EMBER_FIXTURES or run scripts/fetch-fixtures.sh)\n", what.c_str());
  std::fflush(stdout);
}

std::optional<std::filesystem::path> fixture(const std::string& relative) {
  require_fixture_suite();
  auto dir = find_fixtures_dir();
  if (!dir) {
    skip("fixture " + relative + " not found: no fixtures folder in " + fixtures_searched());
    return std::nullopt;
  }
  auto path = *dir / relative;
  if (!std::filesystem::exists(path)) {
    skip("fixture " + relative + " not found in " + dir->string());
    return std::nullopt;
  }
  return path;
}

}  // namespace ember::test
