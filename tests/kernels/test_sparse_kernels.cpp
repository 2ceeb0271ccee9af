// The sparse FFN's kernels (core/kernels/sparse_kernels.h) of every kernel set this build and CPU
// can run, against the generic reference: bit for bit where the contract says the same floats,
// within float summation order for the prepared-input dot.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/kernels/fp16.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/q4_0_prepared_input.h"
#include "core/kernels/sparse_kernels.h"
#include "tests/kernels/test_helpers.h"

using namespace ember;

namespace {

struct NamedSet {
  std::string name;
  const SparseKernels* k;
};

// Every set that runs here, the scalar reference included.
std::vector<NamedSet> runnable_sets() {
  std::vector<NamedSet> sets;
  for (KernelSet set : test::kAllKernelSets) {
    if (const SparseKernels* k = sparse_kernels_for(set)) sets.push_back({kernel_set_name(set), k});
  }
  return sets;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// `rows` rows of n random values quantized with the reference quantizer of `type`.
struct Rows {
  std::vector<uint8_t> bytes;
  size_t stride = 0;
  std::vector<const void*> ptrs;
};

Rows make_rows(GgmlType type, int64_t n, int rows, uint32_t seed) {
  const KernelTraits& t = *scalar_kernel_traits(type);
  Rows m;
  m.stride = test::bytes_for(t, n);
  m.bytes.resize(m.stride * static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    t.from_float(test::random_floats(static_cast<size_t>(n), seed + static_cast<uint32_t>(r), 0.1f).data(),
                 m.bytes.data() + m.stride * static_cast<size_t>(r), n);
    m.ptrs.push_back(m.bytes.data() + m.stride * static_cast<size_t>(r));
  }
  return m;
}

}  // namespace

TEST_CASE("the active set's sparse kernels are one of the runnable sets") {
  const SparseKernels* active = sparse_kernels_for(active_kernel_set());
  REQUIRE(active != nullptr);
  CHECK(active == &sparse_kernels());
  CHECK(sparse_kernels_for(KernelSet::Scalar) != nullptr);
}

TEST_CASE("F32/F16 axpy: bit for bit the reference in every set, any length") {
  for (const NamedSet& set : runnable_sets()) {
    for (int64_t n : {1, 7, 16, 33, 100, 4096}) {
      CAPTURE(set.name);
      CAPTURE(n);
      const std::vector<float> x = test::random_floats(static_cast<size_t>(n), 3);
      const std::vector<float> y0 = test::random_floats(static_cast<size_t>(n), 4);
      std::vector<uint16_t> xh(static_cast<size_t>(n));
      fp32_to_fp16_row(x.data(), xh.data(), n);
      std::vector<float> want = y0, got = y0;
      generic::axpy_f32(n, -0.37f, x.data(), want.data());
      set.k->axpy_f32(n, -0.37f, x.data(), got.data());
      CHECK(same_bits(got, want));
      want = got = y0;
      generic::axpy_f16(n, 1.9f, xh.data(), want.data());
      set.k->axpy_f16(n, 1.9f, xh.data(), got.data());
      CHECK(same_bits(got, want));
    }
  }
}

TEST_CASE("fused quantized axpy: y = fma(q, a * d, y) in every set, close to dequantize-then-axpy") {
  const int64_t n = 256;
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0}) {
    const Rows m = make_rows(type, n, 1, 11);
    std::vector<float> y0(static_cast<size_t>(n)), want(y0.size());
    for (int64_t i = 0; i < n; ++i) y0[static_cast<size_t>(i)] = std::sin(0.1f * static_cast<float>(i));
    const float a = -0.37f;
    // The documented arithmetic, written out here.
    for (int64_t blk = 0; blk < n / 32; ++blk) {
      const uint8_t* base = m.bytes.data() + blk * (type == GgmlType::Q4_0 ? 18 : 34);
      uint16_t d16;
      std::memcpy(&d16, base, 2);
      const float ad = a * fp16_to_fp32(d16);
      for (int j = 0; j < 32; ++j) {
        float q;
        if (type == GgmlType::Q4_0) {
          const uint8_t byte = base[2 + (j % 16)];
          q = static_cast<float>((j < 16 ? byte & 0x0F : byte >> 4) - 8);
        } else {
          q = static_cast<float>(static_cast<int8_t>(base[2 + j]));
        }
        const size_t e = static_cast<size_t>(blk * 32 + j);
        want[e] = std::fma(q, ad, y0[e]);
      }
    }
    // And within rounding of the three-step dequantize, scale, add.
    std::vector<float> deq(y0.size());
    scalar_kernel_traits(type)->to_float(m.bytes.data(), deq.data(), n);
    for (const NamedSet& set : runnable_sets()) {
      CAPTURE(type_name(type));
      CAPTURE(set.name);
      std::vector<float> got = y0;
      (type == GgmlType::Q4_0 ? set.k->axpy_q4_0 : set.k->axpy_q8_0)(n / 32, a, m.bytes.data(), got.data());
      CHECK(same_bits(got, want));
      float worst = 0.0f;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - (y0[i] + a * deq[i])));
      CHECK(worst <= 1e-6f);
    }
  }
}

TEST_CASE("multi-row Q4_0 axpy: bit for bit one reference axpy_q4_0 per row in order, for every row count") {
  // The down accumulation groups neurons; the output must not depend on the grouping.
  const int64_t n = 160;
  constexpr int kRows = 19;  // covers groups of 8, 4, 2 and 1
  const Rows m = make_rows(GgmlType::Q4_0, n, kRows, 47);
  std::vector<float> a;
  for (int r = 0; r < kRows; ++r) a.push_back(0.25f * static_cast<float>(r) - 2.1f);
  std::vector<float> y0(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y0[static_cast<size_t>(i)] = std::cos(0.3f * static_cast<float>(i));
  for (const NamedSet& set : runnable_sets()) {
    for (int count : {0, 1, 2, 3, 4, 5, 7, 8, 9, 16, kRows}) {
      CAPTURE(set.name);
      CAPTURE(count);
      std::vector<float> want = y0, got = y0;
      for (int r = 0; r < count; ++r) generic::axpy_q4_0(n / 32, a[static_cast<size_t>(r)], m.ptrs[static_cast<size_t>(r)], want.data());
      set.k->axpy_q4_0_rows(n / 32, a.data(), m.ptrs.data(), count, got.data());
      CHECK(same_bits(got, want));
    }
  }
}

TEST_CASE("prepared-input Q4_0 dot: same integers as vec_dot, every set within summation order of the reference") {
  for (int64_t n : {32, 64, 96, 160, 4096}) {
    const Rows m = make_rows(GgmlType::Q4_0, n, 3, 21);
    std::vector<float> x = test::random_floats(static_cast<size_t>(n), 9, 2.0f);
    x[0] = 300.0f;  // a large value: a block scale far from the others
    Q4PreparedInput prep;
    prep.reserve(n);
    prep.prepare(x.data(), n);
    std::vector<uint8_t> xq(test::bytes_for(*scalar_kernel_traits(GgmlType::Q8_0), n));
    scalar_kernel_traits(GgmlType::Q8_0)->from_float(x.data(), xq.data(), n);
    for (const void* row : m.ptrs) {
      const float want = scalar_kernel_traits(GgmlType::Q4_0)->vec_dot(n, row, xq.data());
      const float reference = generic::dot_q4_0_prepared(row, prep.view());
      // Same integer block sums and scales; only the float summation order differs.
      const float scale = std::max(1.0f, std::fabs(want));
      CAPTURE(n);
      CHECK(std::fabs(reference - want) <= 1e-5f * scale);
      for (const NamedSet& set : runnable_sets()) {
        CAPTURE(set.name);
        CHECK(std::fabs(set.k->dot_q4_0_prepared(row, prep.view()) - reference) <= 1e-5f * scale);
      }
    }
  }
}

TEST_CASE("multi-row prepared Q4_0 dot: bit for bit the set's one-row dot, for every row count and length") {
  // Results must not depend on which neurons end up in a group.
  for (int64_t n : {32, 64, 96, 160, 4096}) {
    constexpr int kRows = 19;  // covers groups of 8, 4, 2 and 1
    const Rows m = make_rows(GgmlType::Q4_0, n, kRows, 33);
    const std::vector<float> x = test::random_floats(static_cast<size_t>(n), 5, 1.5f);
    Q4PreparedInput prep;
    prep.reserve(n);
    prep.prepare(x.data(), n);
    for (const NamedSet& set : runnable_sets()) {
      for (int count : {0, 1, 2, 3, 4, 5, 7, 8, 9, 16, kRows}) {
        CAPTURE(n);
        CAPTURE(set.name);
        CAPTURE(count);
        std::vector<float> got(static_cast<size_t>(kRows), -1.0f), want = got;
        set.k->dot_q4_0_prepared_rows(m.ptrs.data(), count, prep.view(), got.data(), RowsAhead{});
        for (int r = 0; r < count; ++r) want[static_cast<size_t>(r)] = set.k->dot_q4_0_prepared(m.ptrs[static_cast<size_t>(r)], prep.view());
        CHECK(same_bits(got, want));  // and nothing past count written
        // Rows requested ahead (the next group's) change nothing.
        std::vector<float> with_ahead(static_cast<size_t>(kRows), -1.0f);
        const RowsAhead ahead{m.ptrs.data() + count, std::min(8, kRows - count)};
        set.k->dot_q4_0_prepared_rows(m.ptrs.data(), count, prep.view(), with_ahead.data(), ahead);
        CHECK(same_bits(with_ahead, got));
      }
    }
  }
}

TEST_CASE("EMBER_KERNELS names: the documented ones parse, anything else is an error") {
  for (KernelSet set : test::kAllKernelSets) {
    CHECK(parse_kernel_set(kernel_set_name(set)) == set);
  }
  CHECK(std::string(kernel_set_name(KernelSet::Avx2)) == "avx2");
  CHECK(std::string(kernel_set_name(KernelSet::Neon)) == "neon");
  CHECK(std::string(kernel_set_name(KernelSet::NeonDotprod)) == "neon-dotprod");
  CHECK_THROWS_AS(parse_kernel_set("avx3"), std::invalid_argument);
  CHECK_THROWS_AS(parse_kernel_set("SCALAR"), std::invalid_argument);
}
