#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/kernels/type_traits.h"
#include "tests/kernels/test_helpers.h"

using namespace ember;
using ember::test::quantize;
using ember::test::random_floats;

namespace {

// Dot of the dequantized vectors in double, and the sum of |terms| that scales the tolerance.
void float_dot(const KernelTraits& w_traits, const std::vector<uint8_t>& w, const KernelTraits& a_traits,
               const std::vector<uint8_t>& a, int64_t n, double& dot, double& magnitude) {
  std::vector<float> wf(n), af(n);
  w_traits.to_float(w.data(), wf.data(), n);
  a_traits.to_float(a.data(), af.data(), n);
  dot = magnitude = 0;
  for (int64_t i = 0; i < n; ++i) {
    dot += static_cast<double>(wf[i]) * af[i];
    magnitude += std::fabs(static_cast<double>(wf[i]) * af[i]);
  }
}

}  // namespace

TEST_CASE("active vec_dot matches the scalar reference, and both match the float dot") {
  MESSAGE("active kernel set: " << std::string(kernel_set_name(active_kernel_set())));
  for (GgmlType type : ember::test::kComputeTypes) {
    const KernelTraits* active = kernel_traits(type);
    const KernelTraits* scalar = scalar_kernel_traits(type);
    REQUIRE(active != nullptr);
    REQUIRE(scalar != nullptr);
    const KernelTraits* act_traits = scalar_kernel_traits(scalar->vec_dot_type);
    // Integer-accumulating kernels differ from the reference only by float summation order.
    const bool integer_kernel = type != GgmlType::F32 && type != GgmlType::F16 && type != GgmlType::BF16;
    const double tolerance = integer_kernel ? 1e-5 : 1e-4;
    for (int64_t n : {256, 512, 4096, 256 * 11}) {
      for (uint32_t seed = 1; seed <= 4; ++seed) {
        CAPTURE(type_name(type));
        CAPTURE(n);
        CAPTURE(seed);
        const auto w = quantize(*scalar, random_floats(n, seed * 101, 0.05f));
        const auto a = quantize(*act_traits, random_floats(n, seed * 103 + 1, 2.0f));
        double expected, magnitude;
        float_dot(*scalar, w, *act_traits, a, n, expected, magnitude);
        const float reference = scalar->vec_dot(n, w.data(), a.data());
        const float fast = active->vec_dot(n, w.data(), a.data());
        CHECK(std::fabs(reference - expected) <= 1e-5 * magnitude);
        CHECK(std::fabs(fast - reference) <= tolerance * magnitude);
      }
    }
  }
}

TEST_CASE("every runnable set's vec_dot matches the scalar reference") {
  // The active-set case above covers one set per run; this one covers each set the CPU runs (on
  // an ARMv8.2 CPU both NEON sets, whatever EMBER_KERNELS says).
  for (KernelSet set : ember::test::kAllKernelSets) {
    if (kernel_traits_for(set, GgmlType::F32) == nullptr) continue;
    for (GgmlType type : ember::test::kComputeTypes) {
      const KernelTraits* fast = kernel_traits_for(set, type);
      const KernelTraits* scalar = scalar_kernel_traits(type);
      REQUIRE(fast != nullptr);
      const KernelTraits* act_traits = scalar_kernel_traits(scalar->vec_dot_type);
      const bool integer_kernel = type != GgmlType::F32 && type != GgmlType::F16 && type != GgmlType::BF16;
      const double tolerance = integer_kernel ? 1e-5 : 1e-4;
      for (int64_t n : {256, 512, 256 * 11}) {
        for (uint32_t seed = 1; seed <= 3; ++seed) {
          CAPTURE(std::string(kernel_set_name(set)));
          CAPTURE(type_name(type));
          CAPTURE(n);
          const auto w = quantize(*scalar, random_floats(n, seed * 107, 0.05f));
          const auto a = quantize(*act_traits, random_floats(n, seed * 109 + 1, 2.0f));
          double expected, magnitude;
          float_dot(*scalar, w, *act_traits, a, n, expected, magnitude);
          const float reference = scalar->vec_dot(n, w.data(), a.data());
          CHECK(std::fabs(fast->vec_dot(n, w.data(), a.data()) - reference) <= tolerance * magnitude);
        }
      }
    }
    for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
      for (int64_t n : {1, 3, 7, 9, 17, 33, 100}) {
        CAPTURE(std::string(kernel_set_name(set)));
        CAPTURE(type_name(type));
        CAPTURE(n);
        const KernelTraits* t = kernel_traits_for(set, type);
        const auto w = quantize(*t, random_floats(n, 23));
        const auto a = quantize(*t, random_floats(n, 24));
        double expected, magnitude;
        float_dot(*t, w, *t, a, n, expected, magnitude);
        CHECK(std::fabs(t->vec_dot(n, w.data(), a.data()) - expected) <= 1e-5 * magnitude + 1e-6);
      }
    }
  }
}

TEST_CASE("F32/F16/BF16 dots handle lengths that are not a multiple of the SIMD width") {
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    for (int64_t n : {1, 7, 9, 33, 100}) {
      CAPTURE(type_name(type));
      CAPTURE(n);
      const KernelTraits* t = kernel_traits(type);
      const auto w = quantize(*t, random_floats(n, 21));
      const auto a = quantize(*t, random_floats(n, 22));
      double expected, magnitude;
      float_dot(*t, w, *t, a, n, expected, magnitude);
      CHECK(std::fabs(t->vec_dot(n, w.data(), a.data()) - expected) <= 1e-5 * magnitude + 1e-6);
    }
  }
}

TEST_CASE("unsupported types have no traits") {
  CHECK(kernel_traits(GgmlType::Q5_K) == nullptr);
  CHECK(kernel_traits(GgmlType::IQ2_XXS) == nullptr);
  CHECK(kernel_traits(GgmlType::Q4_0)->vec_dot_type == GgmlType::Q8_0);
  CHECK(kernel_traits(GgmlType::Q4_K)->vec_dot_type == GgmlType::Q8_K);
  CHECK(kernel_traits(GgmlType::Q6_K)->vec_dot_type == GgmlType::Q8_K);
  CHECK(kernel_traits(GgmlType::F16)->vec_dot_type == GgmlType::F16);
}
