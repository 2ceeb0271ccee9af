#include "tests/cache/allocation_counter.h"

#include "tests/support/counting_new.h"

namespace ember::cache_test {
long allocations() { return ember::test::allocation_count(); }
}  // namespace ember::cache_test
