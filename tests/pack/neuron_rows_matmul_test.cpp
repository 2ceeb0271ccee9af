// The neuron-major down projection kernel against its scalar reference: every row type a pack can
// hold, rows at a bundle-like stride, token counts around the token block, mostly-zero inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/kernels/thread_pool.h"
#include "core/kernels/type_traits.h"
#include "core/sparse/neuron_rows_matmul.h"

namespace ember {
namespace {

struct Rows {
  std::vector<uint8_t> bytes;
  MatrixView view;
};

// n_ff rows of n_embd values of `type`, each at the start of a `pad`-byte-longer slot (as in a bundle).
Rows make_rows(GgmlType type, int64_t n_ff, int64_t n_embd, uint64_t pad, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const uint64_t rb = row_bytes(type, static_cast<uint64_t>(n_embd));
  Rows r;
  r.bytes.assign(static_cast<size_t>((rb + pad) * static_cast<uint64_t>(n_ff)), 0xAB);  // junk in the gaps
  std::vector<float> v(static_cast<size_t>(n_embd));
  for (int64_t i = 0; i < n_ff; ++i) {
    for (float& x : v) x = normal(rng);
    kernel_traits(type)->from_float(v.data(), r.bytes.data() + static_cast<uint64_t>(i) * (rb + pad), n_embd);
  }
  r.view.type = type;
  r.view.cols = n_embd;
  r.view.rows = n_ff;
  r.view.data = r.bytes.data();
  r.view.row_stride = rb + pad;
  return r;
}

}  // namespace

TEST_CASE("neuron_rows_matmul matches its scalar reference") {
  const int64_t F = 96, E = 512 + 256;  // E: more than one strip, a whole number of K-quant blocks
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    for (int64_t n : {1, 5, 16, 37}) {
      CAPTURE(type_name(type));
      CAPTURE(n);
      const Rows rows = make_rows(type, F, E, /*pad=*/2 * 34, 11);  // a gap like a bundle's other parts
      std::mt19937 rng(static_cast<uint32_t>(n) * 31u);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      const int64_t h_stride = F + 3, out_stride = E + 5;
      std::vector<float> h(static_cast<size_t>(n * h_stride), 0.0f);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < F; ++i) h[static_cast<size_t>(t * h_stride + i)] = u(rng) < 0.8f ? 0.0f : normal(rng);
      for (int64_t i = 0; i < F; i += 7) h[static_cast<size_t>(i)] = 0.0f;  // rows no token uses (n == 1)
      std::vector<float> want(static_cast<size_t>(n * out_stride), -7.0f), got(want);
      neuron_rows_matmul_reference(rows.view, h.data(), n, h_stride, want.data(), out_stride);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::fill(got.begin(), got.end(), -7.0f);
        neuron_rows_matmul(rows.view, h.data(), n, h_stride, got.data(), out_stride, pool);
        float max_diff = 0.0f;
        for (int64_t t = 0; t < n; ++t) {
          for (int64_t e = 0; e < E; ++e) {
            const size_t k = static_cast<size_t>(t * out_stride + e);
            max_diff = std::max(max_diff, std::fabs(got[k] - want[k]));
          }
          CHECK(got[static_cast<size_t>(t * out_stride + E)] == -7.0f);  // nothing past the row written
        }
        // Same products in the same order (multiply, then add): the same floats.
        CHECK(max_diff == 0.0f);
      }
    }
  }
}

TEST_CASE("neuron_rows_matmul with all-zero activations writes zeros") {
  const Rows rows = make_rows(GgmlType::Q4_0, 32, 64, 0, 3);
  std::vector<float> h(32 * 2, 0.0f), out(64 * 2, 5.0f);
  ThreadPool pool(2);
  neuron_rows_matmul(rows.view, h.data(), 2, 32, out.data(), 64, pool);
  for (float v : out) CHECK(v == 0.0f);
}

}  // namespace ember
