// doctest's main plus the fixture convention of tests/support/fixtures.h. One option of our own,
// which ctest passes (CMakeLists.txt, ember_test):
//   --fixtures=exclude  only the cases that need no fixtures (ctest entry X): they always run, and
//                       doctest's summary counts the fixture cases as skipped;
//   --fixtures=only     only the fixture cases (ctest entry X_fixtures); exit 77 (ctest "Skipped")
//                       with a SKIPPED line when the fixtures folder is absent;
//   (none)              every case; without fixtures the fixture cases are left out, visibly.
// Exit 77 also when a fixture case skipped because one file was missing and nothing failed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "tests/support/fixtures.h"

namespace ember::test {
int& skip_count();
}

namespace {

enum class Mode { all, exclude, only };

// Removes --fixtures=... from the arguments (doctest would ignore it, but a typo must not pass).
bool take_mode(std::vector<char*>& args, Mode& mode) {
  for (auto it = args.begin(); it != args.end(); ++it) {
    if (std::strncmp(*it, "--fixtures=", 11) != 0) continue;
    const char* value = *it + 11;
    if (std::strcmp(value, "exclude") == 0) mode = Mode::exclude;
    else if (std::strcmp(value, "only") == 0) mode = Mode::only;
    else return false;
    args.erase(it);
    return true;
  }
  return true;
}

void print_absent(int cases) {
  std::printf("SKIPPED: %d fixture test case(s): no fixtures folder in %s "
              "(set EMBER_FIXTURES or run scripts/fetch-fixtures.sh)\n",
              cases, ember::test::fixtures_searched().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ember::test;
  std::vector<char*> args(argv, argv + argc);
  Mode mode = Mode::all;
  if (!take_mode(args, mode)) {
    std::fprintf(stderr, "--fixtures= takes exclude or only\n");
    return 2;
  }
  const bool have_fixtures = fixtures_dir().has_value();
  if (mode == Mode::only && !have_fixtures) {
    print_absent(fixture_case_count());
    return 77;
  }

  doctest::Context context(static_cast<int>(args.size()), args.data());
  if (mode == Mode::only) context.addFilter("test-suite", kFixtureSuite);
  if (mode == Mode::exclude || !have_fixtures) context.addFilter("test-suite-exclude", kFixtureSuite);
  const int rc = context.run();
  if (context.shouldExit()) return rc;
  if (rc != 0) return rc;
  if (mode == Mode::all && !have_fixtures && fixture_case_count() > 0) {
    print_absent(fixture_case_count());
    return 77;
  }
  if (skip_count() > 0) {
    std::printf("SKIPPED: %d fixture(s) not found; the rest passed\n", skip_count());
    return 77;
  }
  return rc;
}
