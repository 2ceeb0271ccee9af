// The sparse FFN kernel alone, at a model's shape, on weights far bigger than the caches: how long
// sparse_ffn() takes per token over all layers, and the bytes per second it streams. A benchmark,
// not a test; build with `cmake --build build --target ember-sparse-kernel-bench`.
//
// usage: ember-sparse-kernel-bench [--embd 4096] [--ff 14336] [--layers 32] [--threads 2]
//          [--active 0.137] [--gate-positive 0.72] [--up-positive 0.9] [--layout pack|plain]
//          [--runs 9]
// Defaults are mistral-7b with the drelu synthetic model's predictor figures (13.7 % of neurons
// listed, 72 % of those with a positive gate, 90 % of positive ups), Q4_0 weights. Rows are random;
// each listed neuron's gate/up signs are set by negating its row, so the relu short-cuts fire
// as often as on the real model. Every layer has its own copy of the weights, so nothing stays in
// the caches between layers (mistral-7b: 3.2 GB).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/quant_blocks.h"
#include "core/kernels/type_traits.h"
#include "core/sparse/sparse_ffn.h"

using namespace ember;

namespace {

struct Options {
  int64_t embd = 4096, ff = 14336;
  int layers = 32, threads = 2, runs = 9;
  double active = 0.137, gate_positive = 0.72, up_positive = 0.9;
  bool pack = true;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: ember-sparse-kernel-bench [--embd N] [--ff N] [--layers N] [--threads N] [--active F]\n"
               "         [--gate-positive F] [--up-positive F] [--layout pack|plain] [--runs N]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage();
    const char* v = argv[++i];
    if (k == "--embd") o.embd = std::atoll(v);
    else if (k == "--ff") o.ff = std::atoll(v);
    else if (k == "--layers") o.layers = std::atoi(v);
    else if (k == "--threads") o.threads = std::atoi(v);
    else if (k == "--runs") o.runs = std::atoi(v);
    else if (k == "--active") o.active = std::atof(v);
    else if (k == "--gate-positive") o.gate_positive = std::atof(v);
    else if (k == "--up-positive") o.up_positive = std::atof(v);
    else if (k == "--layout") o.pack = std::string(v) == "pack";
    else usage();
  }
  if (o.embd % 256 != 0 || o.ff <= 0 || o.layers <= 0 || o.threads <= 0 || o.runs <= 0) usage();
  return o;
}

// Quantizes a random row whose dot with x has the wanted sign.
void make_row(std::mt19937& rng, const std::vector<float>& x, bool positive, uint8_t* dst) {
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> row(x.size());
  for (auto& v : row) v = nd(rng);
  double dot = 0;
  for (size_t j = 0; j < x.size(); ++j) dot += static_cast<double>(row[j]) * x[j];
  if ((dot > 0) != positive)
    for (auto& v : row) v = -v;
  kernel_traits(GgmlType::Q4_0)->from_float(row.data(), dst, static_cast<int64_t>(row.size()));
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const uint64_t rb = row_bytes(GgmlType::Q4_0, static_cast<uint64_t>(o.embd));
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  std::vector<float> x(static_cast<size_t>(o.embd));
  for (auto& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);

  // Per layer: the listed neurons (ascending) and the weights, bundles [gate | up | down] in a pack
  // or three separate matrices.
  struct Layer {
    std::vector<int32_t> active;
    std::vector<uint8_t> bytes;
    MatrixView gate, up, down;
  };
  std::vector<Layer> layers(static_cast<size_t>(o.layers));
  std::vector<uint8_t> row0(rb), row1(rb);
  for (int l = 0; l < o.layers; ++l) {
    Layer& L = layers[static_cast<size_t>(l)];
    L.bytes.assign(rb * 3 * static_cast<uint64_t>(o.ff), 0);
    auto view = [&](uint64_t offset, uint64_t stride) {
      MatrixView m;
      m.type = GgmlType::Q4_0;
      m.cols = o.embd;
      m.rows = o.ff;
      m.data = L.bytes.data() + offset;
      m.row_stride = stride;
      return m;
    };
    const uint64_t F = static_cast<uint64_t>(o.ff);
    L.gate = o.pack ? view(0, 3 * rb) : view(0, rb);
    L.up = o.pack ? view(rb, 3 * rb) : view(F * rb, rb);
    L.down = o.pack ? view(2 * rb, 3 * rb) : view(2 * F * rb, rb);
    // Two prototype rows (dot > 0 and dot < 0) copied everywhere keep the setup quick; the bytes
    // differ per neuron only in sign pattern, which is all the kernel's branches look at.
    make_row(rng, x, true, row0.data());
    make_row(rng, x, false, row1.data());
    for (int64_t i = 0; i < o.ff; ++i) {
      const bool listed = uni(rng) < o.active;
      if (listed) L.active.push_back(static_cast<int32_t>(i));
      auto* g = static_cast<uint8_t*>(const_cast<void*>(L.gate.data)) + L.gate.row_stride * static_cast<uint64_t>(i);
      auto* u = static_cast<uint8_t*>(const_cast<void*>(L.up.data)) + L.up.row_stride * static_cast<uint64_t>(i);
      auto* d = static_cast<uint8_t*>(const_cast<void*>(L.down.data)) + L.down.row_stride * static_cast<uint64_t>(i);
      std::memcpy(g, uni(rng) < o.gate_positive ? row0.data() : row1.data(), rb);
      std::memcpy(u, uni(rng) < o.up_positive ? row0.data() : row1.data(), rb);
      std::memcpy(d, row0.data(), rb);
    }
  }

  ThreadPool pool(o.threads);
  SparseFfnScratch scratch;
  scratch.reserve(o.embd, o.ff, pool.size());
  std::vector<float> out(static_cast<size_t>(o.embd));
  std::vector<double> ms;
  int64_t listed = 0, nonzero = 0;
  for (int run = 0; run <= o.runs; ++run) {  // run 0 warms up
    listed = nonzero = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& L : layers) {
      SparseFfnArgs a;
      a.gate = L.gate;
      a.up = L.up;
      a.down_rows = L.down;
      a.act = FfnActivation::DReLU;
      a.x = x.data();
      a.active = L.active.data();
      a.n_active = static_cast<int64_t>(L.active.size());
      a.out = out.data();
      nonzero += sparse_ffn(a, pool, scratch);
      listed += a.n_active;
    }
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (run > 0) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  // Bytes the kernel must read: every listed gate row, the up rows of positive gates, the down
  // rows of non-zero activations (an approximation for the up rows: positive gates = nonzero / up+).
  const double gates = static_cast<double>(listed) * static_cast<double>(rb);
  const double ups = static_cast<double>(nonzero) / o.up_positive * static_cast<double>(rb);
  const double downs = static_cast<double>(nonzero) * static_cast<double>(rb);
  const double mb = (gates + ups + downs) / 1e6;
  std::printf("layout %s, %d threads, %d layers, E %lld F %lld: listed %.3f, nonzero %.3f; "
              "median %.2f ms per token (min %.2f max %.2f over %d runs), %.0f MB read, %.2f GB/s\n",
              o.pack ? "pack" : "plain", pool.size(), o.layers, static_cast<long long>(o.embd),
              static_cast<long long>(o.ff), static_cast<double>(listed) / o.layers / o.ff,
              static_cast<double>(nonzero) / o.layers / o.ff, med, ms.front(), ms.back(), o.runs, mb, mb / med);
  return 0;
}
