// The aarch64 feature checks (getauxval hwcaps). scripts/test-aarch64.sh runs this under qemu with
// EMBER_EXPECT_ARM_FEATURES naming what the emulated CPU has ("dotprod,i8mm,fp16" for -cpu max,
// "none" for -cpu cortex-a53), so the checks are proven against a CPU that has each extension and
// one that has none; without the variable only the architecture-independent facts are checked.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/kernels/cpu_features.h"

using namespace ember;

TEST_CASE("cpu_features: aarch64 extensions from the hwcaps, none elsewhere") {
  std::printf("cpu_features: neon=%d dotprod=%d i8mm=%d fp16=%d\n", cpu_has_neon(), cpu_has_dotprod(),
              cpu_has_i8mm(), cpu_has_fp16_arith());
#if defined(__aarch64__)
  CHECK(cpu_has_neon());
  CHECK_FALSE(cpu_has_avx2_fma_f16c());
  CHECK_FALSE(cpu_has_avx512_vnni());
  if (const char* expect = std::getenv("EMBER_EXPECT_ARM_FEATURES")) {
    const std::string e = std::string(",") + expect + ",";
    CHECK(cpu_has_dotprod() == (e.find(",dotprod,") != std::string::npos));
    CHECK(cpu_has_i8mm() == (e.find(",i8mm,") != std::string::npos));
    CHECK(cpu_has_fp16_arith() == (e.find(",fp16,") != std::string::npos));
  }
#else
  CHECK_FALSE(cpu_has_neon());
  CHECK_FALSE(cpu_has_dotprod());
  CHECK_FALSE(cpu_has_i8mm());
  CHECK_FALSE(cpu_has_fp16_arith());
#endif
}
