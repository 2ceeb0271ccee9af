// SparseBundleFfn (bundles handed over one by one, in any order, as the neuron cache delivers them)
// against sparse_ffn on the same bundles addressed as matrices: the same floats, bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/kernels/type_traits.h"
#include "core/sparse/sparse_bundle_ffn.h"
#include "core/sparse/sparse_ffn.h"

namespace ember {
namespace {

// n_ff bundles [gate row | up row | down column] of random values, all rows of type `type`.
struct Bundles {
  BundleRowsLayout layout;
  uint64_t bundle_bytes = 0;
  std::vector<uint8_t> bytes;
  const uint8_t* bundle(int64_t i) const { return bytes.data() + bundle_bytes * static_cast<uint64_t>(i); }
  MatrixView view(uint64_t offset, int64_t n_embd, int64_t n_ff, GgmlType type) const {
    return MatrixView{type, n_embd, n_ff, bytes.data() + offset, bundle_bytes, nullptr};
  }
};

Bundles make_bundles(GgmlType type, int64_t n_embd, int64_t n_ff, uint32_t seed) {
  Bundles b;
  const uint64_t rb = row_bytes(type, static_cast<uint64_t>(n_embd));
  b.layout = {type, type, type, rb, 2 * rb, n_embd};
  b.bundle_bytes = 3 * rb;
  b.bytes.resize(static_cast<size_t>(b.bundle_bytes * static_cast<uint64_t>(n_ff)));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(n_embd)));
  std::vector<float> row(static_cast<size_t>(n_embd));
  const KernelTraits* t = scalar_kernel_traits(type);
  for (int64_t i = 0; i < n_ff; ++i) {
    for (int part = 0; part < 3; ++part) {
      for (float& v : row) v = normal(rng);
      t->from_float(row.data(), b.bytes.data() + b.bundle_bytes * static_cast<uint64_t>(i) + rb * part, n_embd);
    }
  }
  return b;
}

}  // namespace

TEST_CASE("bundle-by-bundle sparse FFN equals sparse_ffn bit for bit, whatever the arrival order") {
  const int64_t E = 256, F = 384;
  ThreadPool pool(3);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::F16}) {
    const Bundles b = make_bundles(type, E, F, 7);
    for (FfnActivation act : {FfnActivation::DReLU, FfnActivation::ReLU, FfnActivation::SiLU}) {
      CAPTURE(type_name(type));
      CAPTURE(activation_name(act));
      std::mt19937 rng(11);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(E));
      for (float& v : x) v = normal(rng);
      for (int64_t n_active : {int64_t{1}, int64_t{20}, int64_t{200}, F}) {
        std::vector<int32_t> active(static_cast<size_t>(F));
        for (int64_t i = 0; i < F; ++i) active[static_cast<size_t>(i)] = static_cast<int32_t>(i);
        std::shuffle(active.begin(), active.end(), rng);
        active.resize(static_cast<size_t>(n_active));

        SparseFfnArgs a;
        a.gate = b.view(0, E, F, type);
        a.up = b.view(b.layout.up_offset, E, F, type);
        a.down_rows = b.view(b.layout.down_offset, E, F, type);
        a.act = act;
        a.x = x.data();
        a.active = active.data();
        a.n_active = n_active;
        std::vector<float> want(static_cast<size_t>(E)), got(static_cast<size_t>(E));
        a.out = want.data();
        SparseFfnScratch scratch;
        scratch.reserve(E, F, pool.size());
        const int64_t want_nonzero = sparse_ffn(a, pool, scratch);

        SparseBundleFfn k;
        k.reserve(b.layout, F, pool.size());
        k.begin(act, x.data(), n_active);
        // Arrivals in a random order, half of them from the pool's threads.
        std::vector<int64_t> order(static_cast<size_t>(n_active));
        for (int64_t i = 0; i < n_active; ++i) order[static_cast<size_t>(i)] = i;
        std::shuffle(order.begin(), order.end(), rng);
        const int64_t half = n_active / 2;
        pool.parallel_for(half, [&](int64_t i, int) {
          const int64_t kk = order[static_cast<size_t>(i)];
          k.activate(kk, b.bundle(active[static_cast<size_t>(kk)]));
        });
        for (int64_t i = half; i < n_active; ++i) {
          const int64_t kk = order[static_cast<size_t>(i)];
          k.activate(kk, b.bundle(active[static_cast<size_t>(kk)]));
        }
        CHECK(k.finish(got.data(), pool) == want_nonzero);
        CHECK(got == want);
        // All bundles known up front: the fused pass.
        std::fill(got.begin(), got.end(), 0.0f);
        k.begin(act, x.data(), n_active);
        for (int64_t i = 0; i < n_active; ++i) k.set_bundle(i, b.bundle(active[static_cast<size_t>(i)]));
        CHECK(k.run(got.data(), pool) == want_nonzero);
        CHECK(got == want);
      }
    }
  }
}

}  // namespace ember
