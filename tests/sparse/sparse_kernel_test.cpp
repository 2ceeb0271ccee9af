// The sparse FFN kernel against its scalar reference and against the dense computation, the
// active-set selection functions and the neuron-major down copy.
#include <algorithm>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/kernels/fp16.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/sparse_kernels.h"
#include "core/kernels/type_traits.h"
#include "core/sparse/active_set.h"
#include "core/sparse/axpy.h"
#include "core/sparse/q4_0_prepared_dot.h"
#include "core/sparse/neuron_rows.h"
#include "core/sparse/sparse_ffn.h"

namespace ember {
namespace {

// A matrix of `rows` rows of `cols` random values stored in `type`, with its float values.
struct TestMatrix {
  std::vector<float> values;
  std::vector<uint8_t> bytes;
  MatrixView view;
};

TestMatrix make_matrix(GgmlType type, int64_t cols, int64_t rows, uint32_t seed) {
  TestMatrix m;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
  m.values.resize(static_cast<size_t>(cols * rows));
  for (float& v : m.values) v = normal(rng);
  const uint64_t rb = row_bytes(type, static_cast<uint64_t>(cols));
  m.bytes.resize(static_cast<size_t>(rb * static_cast<uint64_t>(rows)));
  const KernelTraits* t = scalar_kernel_traits(type);
  for (int64_t r = 0; r < rows; ++r) {
    t->from_float(&m.values[static_cast<size_t>(r * cols)], m.bytes.data() + rb * static_cast<uint64_t>(r), cols);
    t->to_float(m.bytes.data() + rb * static_cast<uint64_t>(r), &m.values[static_cast<size_t>(r * cols)], cols);
  }
  m.view.type = type;
  m.view.cols = cols;
  m.view.rows = rows;
  m.view.data = m.bytes.data();
  m.view.row_stride = rb;
  return m;
}

std::vector<int32_t> random_subset(int64_t n, double p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution keep(p);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i)
    if (keep(rng)) ids.push_back(static_cast<int32_t>(i));
  return ids;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

float max_abs(const std::vector<float>& a) {
  float d = 0.0f;
  for (float v : a) d = std::max(d, std::fabs(v));
  return d;
}

}  // namespace

TEST_CASE("neuron rows: the transposed copy holds exactly the down matrix's values") {
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    CAPTURE(type_name(type));
    const int64_t n_embd = 96, n_ff = 160;
    TestMatrix down = make_matrix(type, n_ff, n_embd, 3);
    const GgmlType out_type = neuron_rows_type(type);
    CHECK(out_type == (type == GgmlType::F32 ? GgmlType::F32 : GgmlType::F16));
    const std::vector<uint8_t> bytes = transpose_to_neuron_rows(down.view, out_type);
    const MatrixView rows = neuron_rows_view(bytes, out_type, n_ff, n_embd);
    REQUIRE(rows.rows == n_ff);
    REQUIRE(rows.cols == n_embd);
    std::vector<float> row(static_cast<size_t>(n_embd));
    bool exact = true;
    for (int64_t i = 0; i < n_ff; ++i) {
      scalar_kernel_traits(out_type)->to_float(static_cast<const uint8_t*>(rows.data) + rows.row_stride * i, row.data(), n_embd);
      for (int64_t e = 0; e < n_embd; ++e) {
        const float want = down.values[static_cast<size_t>(e * n_ff + i)];
        // F16 copies of F32 values round; of F16 values they are exact.
        const float expect = out_type == GgmlType::F16 ? fp16_to_fp32(fp32_to_fp16(want)) : want;
        if (row[static_cast<size_t>(e)] != expect) exact = false;
      }
    }
    CHECK(exact);
  }
}

TEST_CASE("sparse FFN kernel matches the scalar reference for every weight type and activation") {
  const int64_t n_embd = 256, n_ff = 384;
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (FfnActivation act : {FfnActivation::SiLU, FfnActivation::ReLU, FfnActivation::DReLU}) {
      for (GgmlType down_type : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
        CAPTURE(type_name(type));
        CAPTURE(activation_name(act));
        CAPTURE(type_name(down_type));
        TestMatrix gate = make_matrix(type, n_embd, n_ff, 11);
        TestMatrix up = make_matrix(type, n_embd, n_ff, 12);
        TestMatrix down_rows = make_matrix(down_type, n_embd, n_ff, 13);  // already neuron-major
        std::vector<float> x(static_cast<size_t>(n_embd));
        std::mt19937 rng(5);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (float& v : x) v = normal(rng);
        const std::vector<int32_t> ids = random_subset(n_ff, 0.3, 17);

        SparseFfnArgs a;
        a.gate = gate.view;
        a.up = up.view;
        a.down_rows = down_rows.view;
        a.act = act;
        a.x = x.data();
        a.active = ids.data();
        a.n_active = static_cast<int64_t>(ids.size());
        std::vector<float> want(static_cast<size_t>(n_embd)), got1(want.size()), got3(want.size());
        a.out = want.data();
        const int64_t nz_ref = sparse_ffn_reference(a);

        ThreadPool one(1), three(3);
        SparseFfnScratch s1, s3;
        s1.reserve(n_embd, n_ff, one.size());
        s3.reserve(n_embd, n_ff, three.size());
        a.out = got1.data();
        const int64_t nz1 = sparse_ffn(a, one, s1);
        a.out = got3.data();
        const int64_t nz3 = sparse_ffn(a, three, s3);
        // The summation order of each output is fixed: any thread count gives the same floats.
        CHECK(got1 == got3);
        CHECK(nz1 == nz3);
        // Against the scalar reference, only the dot products' SIMD summation order differs
        // (identical with EMBER_KERNELS=scalar): relative 1e-5 of the output's scale.
        CHECK(max_abs_diff(got1, want) <= 1e-5f * std::max(1.0f, max_abs(want)));
        if (is_relu_family(act)) {
          CHECK(nz1 <= a.n_active);
          CHECK(std::abs(nz1 - nz_ref) <= 2);  // a dot product at exactly 0 may flip sign
          CHECK(nz1 < a.n_active);             // some listed neurons are inactive
        }
      }
    }
  }
}

TEST_CASE("sparse FFN over every neuron equals the dense FFN; over the active set too") {
  const int64_t n_embd = 128, n_ff = 512;
  TestMatrix gate = make_matrix(GgmlType::F32, n_embd, n_ff, 21);
  TestMatrix up = make_matrix(GgmlType::F32, n_embd, n_ff, 22);
  TestMatrix down_rows = make_matrix(GgmlType::F32, n_embd, n_ff, 23);
  std::vector<float> x(static_cast<size_t>(n_embd));
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  for (FfnActivation act : {FfnActivation::SiLU, FfnActivation::ReLU, FfnActivation::DReLU}) {
    CAPTURE(activation_name(act));
    // Dense, in double: h = act(gate x, up x), out = down h.
    std::vector<double> g(static_cast<size_t>(n_ff)), u(g.size());
    std::vector<float> gf(g.size()), uf(g.size());
    for (int64_t i = 0; i < n_ff; ++i) {
      double sg = 0, su = 0;
      for (int64_t e = 0; e < n_embd; ++e) {
        sg += double(gate.values[size_t(i * n_embd + e)]) * x[size_t(e)];
        su += double(up.values[size_t(i * n_embd + e)]) * x[size_t(e)];
      }
      gf[size_t(i)] = float(sg);
      uf[size_t(i)] = float(su);
    }
    std::vector<double> dense(static_cast<size_t>(n_embd), 0.0);
    for (int64_t i = 0; i < n_ff; ++i) {
      const double h = neuron_activation(act, gf[size_t(i)], uf[size_t(i)]);
      for (int64_t e = 0; e < n_embd; ++e) dense[size_t(e)] += h * down_rows.values[size_t(i * n_embd + e)];
    }
    std::vector<int32_t> all(static_cast<size_t>(n_ff)), active(all.size());
    for (int64_t i = 0; i < n_ff; ++i) all[size_t(i)] = static_cast<int32_t>(i);
    const int64_t n_active = is_relu_family(act) ? select_relu_active(gf.data(), uf.data(), n_ff, act, active.data()) : 0;
    if (is_relu_family(act)) {
      CHECK(n_active > n_ff / 8);
      CHECK(n_active < n_ff);
    }

    ThreadPool pool(2);
    SparseFfnScratch s;
    s.reserve(n_embd, n_ff, pool.size());
    for (int pass = 0; pass < (is_relu_family(act) ? 2 : 1); ++pass) {
      SparseFfnArgs a;
      a.gate = gate.view;
      a.up = up.view;
      a.down_rows = down_rows.view;
      a.act = act;
      a.x = x.data();
      a.active = pass == 0 ? all.data() : active.data();
      a.n_active = pass == 0 ? n_ff : n_active;
      std::vector<float> out(static_cast<size_t>(n_embd));
      a.out = out.data();
      sparse_ffn(a, pool, s);
      double worst = 0, scale = 0;
      for (int64_t e = 0; e < n_embd; ++e) {
        worst = std::max(worst, std::fabs(out[size_t(e)] - dense[size_t(e)]));
        scale = std::max(scale, std::fabs(dense[size_t(e)]));
      }
      CAPTURE(pass);
      CHECK(worst <= 1e-5 * std::max(1.0, scale));
    }
  }
}

TEST_CASE("active-set selection") {
  const std::vector<float> v = {0.5f, -1.0f, 0.0f, 2.0f, -0.25f, 3.0f};
  std::vector<int32_t> out(v.size());
  CHECK(select_above(v.data(), 6, 0.0f, out.data()) == 3);
  CHECK(out[0] == 0);
  CHECK(out[1] == 3);
  CHECK(out[2] == 5);
  CHECK(select_above(v.data(), 6, 2.5f, out.data()) == 1);
  CHECK(out[0] == 5);
  CHECK(select_relu_active(v.data(), nullptr, 6, FfnActivation::ReLU, out.data()) == 3);
  const std::vector<float> up = {1.0f, 1.0f, 1.0f, -1.0f, 1.0f, 1.0f};
  CHECK(select_relu_active(v.data(), up.data(), 6, FfnActivation::DReLU, out.data()) == 2);
  CHECK(out[0] == 0);
  CHECK(out[1] == 5);
  CHECK(select_by_gate_magnitude(v.data(), 6, FfnActivation::SiLU, 0.0f, out.data()) == 6);
  // ReLU family at threshold 0: the neurons at exactly 0 are left out (they add nothing).
  CHECK(select_by_gate_magnitude(v.data(), 6, FfnActivation::ReLU, 0.0f, out.data()) == 3);
  CHECK(out[1] == 3);
  // |silu|: 0.311, 0.269, 0, 1.762, 0.110, 2.857
  CHECK(select_by_gate_magnitude(v.data(), 6, FfnActivation::SiLU, 0.3f, out.data()) == 3);
  std::vector<float> scratch(v.size());
  const float q = gate_magnitude_quantile(v.data(), 6, FfnActivation::SiLU, 0.5f, scratch.data());
  CHECK(select_by_gate_magnitude(v.data(), 6, FfnActivation::SiLU, q, out.data()) == 3);
  CHECK(gate_magnitude_quantile(v.data(), 6, FfnActivation::SiLU, 0.0f, scratch.data()) == 0.0f);
  const std::vector<float> h = {0.0f, 1.0f, 0.0f, 2.0f};
  const std::vector<int32_t> ids = {0, 1, 3};
  CHECK(count_nonzero(h.data(), 4) == 2);
  CHECK(count_nonzero_at(h.data(), ids.data(), 3) == 2);
}

}  // namespace ember

namespace ember {

TEST_CASE("with Q8_0 weights the sparse down sum is closer to exact arithmetic than the dense matmul") {
  // Justifies the Q8_0 tolerance of the decode tests: the dense path rounds the activations h to
  // Q8_0 before its down matmul; the sparse path multiplies h exactly with the F16 neuron rows
  // (which hold the Q8_0 weights to 11 bits).
  const int64_t n_embd = 128, n_ff = 512;
  TestMatrix down = make_matrix(GgmlType::Q8_0, n_ff, n_embd, 31);  // {n_ff, n_embd} as in a model
  std::vector<float> h(static_cast<size_t>(n_ff), 0.0f);
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : h) v = std::max(0.0f, normal(rng));  // ReLU-like: half exactly 0
  std::vector<double> exact(static_cast<size_t>(n_embd), 0.0);
  for (int64_t e = 0; e < n_embd; ++e)
    for (int64_t i = 0; i < n_ff; ++i) exact[size_t(e)] += double(down.values[size_t(e * n_ff + i)]) * h[size_t(i)];

  ThreadPool pool(2);
  MatmulScratch mm;
  mm.reserve(1, n_ff);
  std::vector<float> dense(static_cast<size_t>(n_embd));
  matmul(down.view, h.data(), 1, n_ff, dense.data(), n_embd, pool, mm);

  const std::vector<uint8_t> bytes = transpose_to_neuron_rows(down.view, GgmlType::F16);
  // The sparse kernel's phase 2: h times the neuron rows, in neuron order.
  const MatrixView rows = neuron_rows_view(bytes, GgmlType::F16, n_ff, n_embd);
  std::vector<float> sparse(static_cast<size_t>(n_embd), 0.0f), row(static_cast<size_t>(n_embd));
  for (int64_t i = 0; i < n_ff; ++i) {
    if (h[size_t(i)] == 0.0f) continue;
    kernel_traits(GgmlType::F16)->to_float(static_cast<const uint8_t*>(rows.data) + rows.row_stride * i, row.data(), n_embd);
    for (int64_t e = 0; e < n_embd; ++e) sparse[size_t(e)] += h[size_t(i)] * row[size_t(e)];
  }
  double dense_err = 0, sparse_err = 0;
  for (int64_t e = 0; e < n_embd; ++e) {
    dense_err = std::max(dense_err, std::fabs(dense[size_t(e)] - exact[size_t(e)]));
    sparse_err = std::max(sparse_err, std::fabs(sparse[size_t(e)] - exact[size_t(e)]));
  }
  MESSAGE("Q8_0 down: dense max error ", dense_err, ", sparse max error ", sparse_err);
  CHECK(sparse_err < dense_err);
}

}  // namespace ember

#include "core/sparse/sparse_options.h"

namespace ember {

TEST_CASE("sparse mode names round-trip") {
  using Mode = SparseOptions::Mode;
  for (Mode m : {Mode::Dense, Mode::Oracle, Mode::Predictor, Mode::Threshold}) {
    Mode parsed = Mode::Dense;
    CHECK(parse_sparse_mode(sparse_mode_name(m), &parsed));
    CHECK(parsed == m);
  }
  Mode untouched = Mode::Oracle;
  CHECK_FALSE(parse_sparse_mode("sparse", &untouched));
  CHECK(untouched == Mode::Oracle);
}

TEST_CASE("the sparse axpy and prepared dots are the active kernel set's (the kernels: tests/kernels)") {
  const int64_t n = 160;
  TestMatrix m = make_matrix(GgmlType::Q4_0, n, 5, 51);
  std::vector<const void*> rows;
  for (int r = 0; r < 5; ++r) rows.push_back(m.bytes.data() + m.view.row_stride * static_cast<uint64_t>(r));
  const std::vector<float> a = {0.5f, -1.25f, 2.0f, 0.125f, -0.75f};
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = std::sin(0.7f * static_cast<float>(i));
  const SparseKernels& k = sparse_kernels();
  std::vector<float> want = x, got = x;
  k.axpy_q4_0_rows(n / 32, a.data(), rows.data(), 5, want.data());
  axpy_q4_0_rows(n / 32, a.data(), rows.data(), 5, got.data());
  CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
  Q4PreparedInput prep;
  prep.reserve(n);
  prep.prepare(x.data(), n);
  std::vector<float> dots(5), one(5);
  dot_q4_0_prepared_rows(rows.data(), 5, prep, dots.data());
  k.dot_q4_0_prepared_rows(rows.data(), 5, prep.view(), one.data(), RowsAhead{});
  CHECK(std::memcmp(dots.data(), one.data(), dots.size() * sizeof(float)) == 0);
  CHECK(dot_q4_0_prepared(rows[0], prep) == k.dot_q4_0_prepared(rows[0], prep.view()));
  CHECK(dot_q4_0_prepared_scalar(rows[0], prep) == generic::dot_q4_0_prepared(rows[0], prep.view()));
}

}  // namespace ember
