// Decode steps on a pack allocate nothing in any mode (the dense down projection from bundles
// included): counted by replacing the global operator new in this test binary.
#include <doctest/doctest.h>

#include "tests/pack/pack_support.h"
#include "tests/sparse/decode_allocations.h"
#include "tests/support/counting_new.h"

namespace ember {

TEST_CASE("decode steps on a pack do not allocate") {
  const test::SourceAndPack files(test::allocation_test_spec(GgmlType::Q4_0, GgmlType::Q8_0), "pack-noalloc");
  auto model = Model::load(files.pk.string());
  REQUIRE(model->weights().is_pack());
  test::check_decode_does_not_allocate(*model, test::allocation_count);
}

}  // namespace ember
