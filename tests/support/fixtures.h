#pragma once
// Where the shared test data live, and how tests that need them are marked and skipped.
//
// Lookup order (the same in the Python and shell test scripts, see scripts/fixtures-dir.sh):
//   1. $EMBER_FIXTURES, when set (an explicit choice: a missing folder there means "no fixtures");
//   2. ../shared/fixtures beside the source tree;
//   3. tests/fixtures/ in the source tree (where scripts/fetch-fixtures.sh downloads them).
//
// A test case that reads fixtures is declared `TEST_CASE("..." * ember::test::needs_fixtures)`: it
// joins the doctest test suite "fixture", which ctest runs as its own entry (X_fixtures) so the
// other cases of the binary always run and pass or fail on their own (see test_main.cpp).
#include <doctest/doctest.h>

#include <filesystem>
#include <optional>
#include <string>

namespace ember::test {

// The doctest suite name of the test cases that read fixtures.
inline constexpr const char* kFixtureSuite = "fixture";

// Decorator: puts a test case in the fixture suite and counts it (for the skip message).
struct NeedsFixtures {
  void fill(doctest::detail::TestCase& state) const;
};
inline constexpr NeedsFixtures needs_fixtures{};

// How many test cases of this binary are declared with needs_fixtures.
int fixture_case_count();

// The repository's source tree (for files checked in beside the code, e.g. config/ember.json).
std::filesystem::path source_dir();

// The fixtures folder, or nullopt when it is absent.
std::optional<std::filesystem::path> fixtures_dir();

// Where fixtures_dir() looked, for messages: "$EMBER_FIXTURES=/x" or the two default folders.
std::string fixtures_searched();

// Records a skip: prints "SKIPPED: <what>" and makes the test binary exit with 77 (ctest "Skipped")
// when nothing failed.
void skip(const std::string& what);

// A file under the fixtures folder, or nullopt (after calling skip) when it is absent. Fails the
// calling test when that test is not declared with needs_fixtures.
std::optional<std::filesystem::path> fixture(const std::string& relative);

}  // namespace ember::test
