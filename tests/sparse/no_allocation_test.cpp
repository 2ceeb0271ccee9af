// Decode steps in every sparse mode allocate nothing: counted by replacing the global operator new
// in this test binary.
#include <doctest/doctest.h>

#include <filesystem>

#include "tests/sparse/decode_allocations.h"
#include "tests/support/counting_new.h"

namespace ember {

TEST_CASE("sparse decode steps do not allocate") {
  const test::SparseModelSpec spec = test::allocation_test_spec(GgmlType::Q8_0, GgmlType::Q4_0);
  const auto path = test::write_sparse_model(spec, "sparse-noalloc");
  const long at_start = test::allocation_count();
  auto model = Model::load(path.string());
  CHECK(test::allocation_count() > at_start);  // the counter does count
  test::check_decode_does_not_allocate(*model, test::allocation_count);
  std::filesystem::remove(path);
}

}  // namespace ember
