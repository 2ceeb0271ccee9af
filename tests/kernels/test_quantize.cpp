#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/kernels/fp16.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/type_traits.h"
#include "tests/kernels/test_helpers.h"

using namespace ember;
using ember::test::quantize;
using ember::test::random_floats;

namespace {

double relative_rms_error(GgmlType type, const std::vector<float>& x) {
  const KernelTraits* t = scalar_kernel_traits(type);
  REQUIRE(t != nullptr);
  const auto q = quantize(*t, x);
  std::vector<float> back(x.size());
  t->to_float(q.data(), back.data(), static_cast<int64_t>(x.size()));
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (back[i] - x[i]) * static_cast<double>(back[i] - x[i]);
    ref += x[i] * static_cast<double>(x[i]);
  }
  return std::sqrt(err / ref);
}

}  // namespace

TEST_CASE("quantize -> dequantize error stays within each type's bound") {
  const auto x = random_floats(256 * 64, 7, 0.02f);
  // Bounds: a few times the expected RMS error of a uniform quantizer with that many levels.
  struct Bound {
    GgmlType type;
    double max_rel_rms;
  };
  for (const Bound& b : {Bound{GgmlType::F32, 0.0}, Bound{GgmlType::F16, 1e-3}, Bound{GgmlType::BF16, 5e-3},
                         Bound{GgmlType::Q8_0, 0.01}, Bound{GgmlType::Q4_0, 0.15}, Bound{GgmlType::Q4_K, 0.12},
                         Bound{GgmlType::Q6_K, 0.04}}) {
    CAPTURE(type_name(b.type));
    const double e = relative_rms_error(b.type, x);
    MESSAGE(type_name(b.type) << " relative RMS error " << e);
    CHECK(e <= b.max_rel_rms);
  }
}

TEST_CASE("Q8_0 per-element error is at most half a step") {
  const auto x = random_floats(32 * 50, 11);
  const KernelTraits* t = scalar_kernel_traits(GgmlType::Q8_0);
  const auto q = quantize(*t, x);
  std::vector<float> back(x.size());
  t->to_float(q.data(), back.data(), static_cast<int64_t>(x.size()));
  const auto* blocks = reinterpret_cast<const block_q8_0*>(q.data());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = fp16_to_fp32(blocks[b].d);
    CHECK(d == doctest::Approx(amax / 127).epsilon(1e-3));
    // Half a step, plus what the half-precision scale can move the largest element.
    for (int j = 0; j < 32; ++j) CHECK(std::fabs(back[b * 32 + j] - x[b * 32 + j]) <= 0.5f * d + amax * 1e-3f);
  }
}

TEST_CASE("Q4_0 layout: low nibbles are elements 0..15, high nibbles 16..31, value (q-8)*d") {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);  // max |x| = 16 at x[0] = -16
  block_q4_0 block;
  scalar_kernel_traits(GgmlType::Q4_0)->from_float(x, &block, 32);
  CHECK(fp16_to_fp32(block.d) == 2.0f);  // d = max / -8 = -16 / -8
  CHECK((block.qs[0] & 0xF) == 0);       // -16 / 2 + 8
  CHECK((block.qs[0] >> 4) == 8);        // x[16] = 0
  CHECK((block.qs[15] >> 4) == 15);      // x[31] = 15 -> 7.5 + 8.5 = 16 clamps to 15
  float back[32];
  scalar_kernel_traits(GgmlType::Q4_0)->to_float(&block, back, 32);
  CHECK(back[0] == -16.0f);
  CHECK(back[16] == 0.0f);
  CHECK(back[31] == 14.0f);
}

TEST_CASE("Q8_K activation quantization: scale -max/127 and exact group sums") {
  const auto x = random_floats(512, 3);
  const KernelTraits* t = scalar_kernel_traits(GgmlType::Q8_K);
  REQUIRE(t != nullptr);
  const auto q = quantize(*t, x);
  const auto* blocks = reinterpret_cast<const block_q8_K*>(q.data());
  for (int b = 0; b < 2; ++b) {
    float max = 0, amax = 0;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(x[b * 256 + j]) > amax) {
        amax = std::fabs(x[b * 256 + j]);
        max = x[b * 256 + j];
      }
    }
    CHECK(blocks[b].d == doctest::Approx(max / -127.0f));
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += blocks[b].qs[16 * g + l];
      CHECK(blocks[b].bsums[g] == sum);
    }
  }
}

TEST_CASE("all-zero input quantizes to zeros without dividing by zero") {
  const std::vector<float> zeros(512, 0.0f);
  for (GgmlType type : ember::test::kComputeTypes) {
    CAPTURE(type_name(type));
    const KernelTraits* t = scalar_kernel_traits(type);
    const auto q = quantize(*t, zeros);
    std::vector<float> back(zeros.size(), 1.0f);
    t->to_float(q.data(), back.data(), 512);
    for (float v : back) REQUIRE(v == 0.0f);
  }
}

TEST_CASE("active quantizers dequantize like the scalar ones") {
  const auto x = random_floats(1024, 5);
  for (GgmlType type : ember::test::kComputeTypes) {
    CAPTURE(type_name(type));
    const KernelTraits* active = kernel_traits(type);
    const KernelTraits* scalar = scalar_kernel_traits(type);
    const auto q = quantize(*scalar, x);
    std::vector<float> a(x.size()), s(x.size());
    active->to_float(q.data(), a.data(), 1024);
    scalar->to_float(q.data(), s.data(), 1024);
    CHECK(a == s);
  }
  // The SIMD Q8_0 quantizer differs from the reference only on exact rounding ties.
  const auto qa = quantize(*kernel_traits(GgmlType::Q8_0), x);
  const auto qs = quantize(*scalar_kernel_traits(GgmlType::Q8_0), x);
  size_t differing = 0;
  for (size_t i = 0; i < qa.size(); ++i) differing += qa[i] != qs[i];
  CHECK(differing <= qa.size() / 100);
}

TEST_CASE("every runnable set's to_float is the scalar one, and its Q8_0 quantizer differs only on ties") {
  const auto x = random_floats(1024, 6);
  for (KernelSet set : ember::test::kAllKernelSets) {
    if (kernel_traits_for(set, GgmlType::F32) == nullptr) continue;
    CAPTURE(std::string(kernel_set_name(set)));
    for (GgmlType type : ember::test::kComputeTypes) {
      CAPTURE(type_name(type));
      const KernelTraits* fast = kernel_traits_for(set, type);
      const KernelTraits* scalar = scalar_kernel_traits(type);
      const auto q = quantize(*scalar, x);
      std::vector<float> a(x.size()), s(x.size());
      fast->to_float(q.data(), a.data(), 1024);
      scalar->to_float(q.data(), s.data(), 1024);
      CHECK(std::memcmp(a.data(), s.data(), a.size() * sizeof(float)) == 0);
      // F16 rows: the same bits as the scalar conversion.
      if (type == GgmlType::F16) CHECK(quantize(*fast, x) == q);
    }
    const auto qa = quantize(*kernel_traits_for(set, GgmlType::Q8_0), x);
    const auto qs = quantize(*scalar_kernel_traits(GgmlType::Q8_0), x);
    size_t differing = 0;
    for (size_t i = 0; i < qa.size(); ++i) differing += qa[i] != qs[i];
    CHECK(differing <= qa.size() / 100);
    // The scales are the same halves; only a quant on an exact tie may move, by one.
    const auto* ba = reinterpret_cast<const block_q8_0*>(qa.data());
    const auto* bs = reinterpret_cast<const block_q8_0*>(qs.data());
    for (size_t b = 0; b < x.size() / 32; ++b) {
      CHECK(ba[b].d == bs[b].d);
      for (int j = 0; j < 32; ++j) CHECK(std::abs(ba[b].qs[j] - bs[b].qs[j]) <= 1);
    }
  }
}
