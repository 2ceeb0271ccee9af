// doctest's main plus the skip convention of tests/support/fixtures.h: exit 77 (ctest "Skipped")
// when some test was skipped for lack of fixtures and nothing failed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace ember::test {
int& skip_count();
}

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (context.shouldExit()) return rc;
  if (rc == 0 && ember::test::skip_count() > 0) {
    std::printf("SKIPPED: %d test(s) skipped for lack of fixtures; the rest passed\n", ember::test::skip_count());
    return 77;
  }
  return rc;
}
