#pragma once
// Where the shared test data live (../shared/fixtures beside the checkout, or $EMBER_FIXTURES), and
// a visible skip for tests that need them.
#include <filesystem>
#include <optional>
#include <string>

namespace ember::test {

// The repository's source tree (for files checked in beside the code, e.g. config/ember.json).
std::filesystem::path source_dir();

// The fixtures folder, or nullopt when it is absent.
std::optional<std::filesystem::path> fixtures_dir();

// Records a skip: prints "SKIPPED: <what>" and makes the test binary exit with 77 (ctest "Skipped")
// when nothing failed. Use as: `auto dir = fixtures_dir(); if (!dir) { skip("..."); return; }`.
void skip(const std::string& what);

// A file under the fixtures folder, or nullopt (after calling skip) when fixtures are absent.
std::optional<std::filesystem::path> fixture(const std::string& relative);

}  // namespace ember::test
