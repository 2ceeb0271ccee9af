// The active attention kernel against the scalar reference, and the reference against a plain
// softmax(q.k) . v computed in double.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/kernels/attention.h"
#include "core/kernels/fp16.h"
#include "tests/kernels/test_helpers.h"

namespace ember {
namespace {

struct Case {
  int64_t n_q, head_dim, n_kv_heads, n_kv;
};

// Runs one group (KV head 1 when there are several) with `fn` and returns its output.
template <class Fn>
std::vector<float> run(const Case& c, const std::vector<float>& q, const std::vector<uint16_t>& k,
                       const std::vector<uint16_t>& v, Fn fn) {
  const int64_t stride = c.n_kv_heads * c.head_dim, g = c.n_kv_heads > 1 ? 1 : 0;
  std::vector<float> out(static_cast<size_t>(c.n_q * c.head_dim)), scores(static_cast<size_t>(c.n_q * c.n_kv)),
      row(static_cast<size_t>(c.head_dim)), qf(static_cast<size_t>(c.n_q * c.head_dim));
  AttentionGroupArgs a;
  a.q = q.data();
  a.n_q = c.n_q;
  a.k = k.data() + g * c.head_dim;
  a.v = v.data() + g * c.head_dim;
  a.kv_stride = stride;
  a.n_kv = c.n_kv;
  a.head_dim = c.head_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  a.out = out.data();
  a.scores = scores.data();
  a.row = row.data();
  a.qf = qf.data();
  fn(a);
  return out;
}

}  // namespace

TEST_CASE("attention_group_f16 matches the scalar reference and an exact softmax") {
  const Case cases[] = {{1, 8, 1, 1}, {4, 4, 2, 3}, {8, 64, 4, 37}, {4, 128, 8, 300}, {2, 12, 2, 9}, {8, 64, 4, 1030}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    const int64_t stride = c.n_kv_heads * c.head_dim;
    const auto q = test::random_floats(static_cast<size_t>(c.n_q * c.head_dim), seed++, 2.0f);
    const auto kf = test::random_floats(static_cast<size_t>(c.n_kv * stride), seed++);
    const auto vf = test::random_floats(static_cast<size_t>(c.n_kv * stride), seed++);
    std::vector<uint16_t> k(kf.size()), v(vf.size());
    for (size_t i = 0; i < kf.size(); ++i) {
      k[i] = fp32_to_fp16(kf[i]);
      v[i] = fp32_to_fp16(vf[i]);
    }
    const auto ref = run(c, q, k, v, attention_group_f16_reference);
    const auto got = run(c, q, k, v, attention_group_f16);
    // Exact: softmax in double over the same F16-rounded inputs.
    const int64_t g = c.n_kv_heads > 1 ? 1 : 0;
    for (int64_t h = 0; h < c.n_q; ++h) {
      std::vector<double> s(static_cast<size_t>(c.n_kv));
      double m = -1e300, sum = 0.0;
      for (int64_t j = 0; j < c.n_kv; ++j) {
        double dot = 0.0;
        for (int64_t i = 0; i < c.head_dim; ++i) {
          dot += static_cast<double>(fp16_to_fp32(fp32_to_fp16(q[static_cast<size_t>(h * c.head_dim + i)]))) *
                 fp16_to_fp32(k[static_cast<size_t>(j * stride + g * c.head_dim + i)]);
        }
        s[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(c.head_dim));
        m = std::max(m, s[static_cast<size_t>(j)]);
      }
      for (double& x : s) sum += (x = std::exp(x - m));
      for (int64_t i = 0; i < c.head_dim; ++i) {
        double o = 0.0;
        for (int64_t j = 0; j < c.n_kv; ++j) {
          o += s[static_cast<size_t>(j)] / sum * fp16_to_fp32(v[static_cast<size_t>(j * stride + g * c.head_dim + i)]);
        }
        const size_t at = static_cast<size_t>(h * c.head_dim + i);
        INFO("n_q " << c.n_q << " head_dim " << c.head_dim << " n_kv " << c.n_kv);
        // Tolerances: the reference differs from the exact value by F32 rounding (~1e-6
        // relative); the SIMD kernel also by its polynomial exp (~2e-7) and summation order.
        CHECK(ref[at] == doctest::Approx(o).epsilon(1e-4).scale(1.0));
        CHECK(got[at] == doctest::Approx(ref[at]).epsilon(1e-5).scale(1.0));
      }
    }
  }
}

}  // namespace ember
