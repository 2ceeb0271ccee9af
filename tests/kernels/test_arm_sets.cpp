// The NEON sets' choice: which set runs follows the CPU's features (getauxval) and EMBER_KERNELS,
// and the dot product set never runs on a CPU without sdot (qemu -cpu cortex-a53 in the tests).
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "core/kernels/cpu_features.h"
#include "core/kernels/sparse_kernels.h"
#include "core/kernels/type_traits.h"

using namespace ember;

#ifdef EMBER_HAVE_ARM_NEON
TEST_CASE("NEON sets: runnable exactly when the CPU has the features, and chosen as the best") {
  REQUIRE(cpu_has_neon());  // every aarch64 Linux CPU
  CHECK(sparse_kernels_for(KernelSet::Neon) != nullptr);
  CHECK((sparse_kernels_for(KernelSet::NeonDotprod) != nullptr) == cpu_has_dotprod());
  CHECK((kernel_traits_for(KernelSet::NeonDotprod, GgmlType::Q4_0) != nullptr) == cpu_has_dotprod());
  // x86 sets are not built here.
  CHECK(sparse_kernels_for(KernelSet::Avx2) == nullptr);
  MESSAGE("cpu_has_dotprod: " << cpu_has_dotprod() << ", active set: " << std::string(kernel_set_name(active_kernel_set())));
  const char* forced = std::getenv("EMBER_KERNELS");
  const std::string name = forced != nullptr ? forced : "";
  if (name.empty()) {
    CHECK(active_kernel_set() == (cpu_has_dotprod() ? KernelSet::NeonDotprod : KernelSet::Neon));
  } else if (name == "neon") {
    CHECK(active_kernel_set() == KernelSet::Neon);
  } else if (name == "neon-dotprod") {
    CHECK(active_kernel_set() == (cpu_has_dotprod() ? KernelSet::NeonDotprod : KernelSet::Neon));
  } else if (name == "scalar" || name == "avx2" || name == "avx512-vnni") {
    CHECK(active_kernel_set() == KernelSet::Scalar);  // another architecture's name: scalar
  }
}
#endif
