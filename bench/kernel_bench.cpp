// Kernel micro-benchmark: Q4_0 matrix-vector (decode) bandwidth and Q4_0 matrix-matrix (prefill)
// throughput, medians of several runs. Not a test; build it on its own:
//
//   bash bench/build_kernel_bench.sh [build-dir]      (default /tmp/ember-kernel-bench)
//   /tmp/ember-kernel-bench/kernel_bench [--quick]
//
// "repacked" rows use a repack_for_matmul() copy (MatrixView::repacked), as a model loader that
// repacks at load time would. Decode rotates over several copies of the weights so that each run streams from DRAM rather
// than the L3 cache, as a real model's layers do.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/matmul.h"
#include "core/kernels/type_traits.h"
#include "core/tensor/ggml_type.h"

using namespace ember;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

std::vector<uint8_t> random_q4_0(int64_t rows, int64_t cols, uint32_t seed) {
  const KernelTraits* t = kernel_traits(GgmlType::Q4_0);
  std::vector<uint8_t> w(row_bytes(GgmlType::Q4_0, cols) * rows);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& x : row) x = dist(rng);
    t->from_float(row.data(), w.data() + r * row_bytes(GgmlType::Q4_0, cols), cols);
  }
  return w;
}

void bench_matvec(int64_t rows, int64_t cols, int threads, int runs, bool repack) {
  const int copies = 3;
  std::vector<std::vector<uint8_t>> weights;
  std::vector<std::vector<uint8_t>> repacked;
  for (int c = 0; c < copies; ++c) {
    weights.push_back(random_q4_0(rows, cols, 100 + c));
    if (repack) {
      repacked.push_back(repack_for_matmul({GgmlType::Q4_0, cols, rows, weights.back().data(), row_bytes(GgmlType::Q4_0, cols)}));
      if (repacked.back().empty()) return;  // no repacked layout on this CPU
      weights.back() = std::vector<uint8_t>(weights.back().size());  // decode reads only the copy
    }
  }
  std::vector<float> x(cols, 0.5f), y(rows);
  ThreadPool pool(threads);
  MatmulScratch scratch;
  scratch.reserve(1, cols);
  const uint64_t bytes = weights[0].size();
  std::vector<double> times;
  for (int run = 0; run < runs + copies; ++run) {
    MatrixView w{GgmlType::Q4_0, cols, rows, weights[run % copies].data(), row_bytes(GgmlType::Q4_0, cols)};
    if (repack) w.repacked = repacked[run % copies].data();
    const auto start = std::chrono::steady_clock::now();
    matmul(w, x.data(), 1, cols, y.data(), rows, pool, scratch);
    const double t = seconds_since(start);
    if (run >= copies) times.push_back(t);  // the first round warms the pool and page tables
  }
  const double t = median(times), best = fastest(times);
  std::printf("Q4_0 matvec%s rows=%-6lld cols=%-6lld threads=%d  median %8.3f ms %6.2f GB/s   best %6.2f GB/s\n",
              repack ? " repacked" : "", static_cast<long long>(rows), static_cast<long long>(cols), threads, t * 1e3,
              bytes / t / 1e9, bytes / best / 1e9);
}

void bench_matmul(int64_t rows, int64_t cols, int64_t tokens, int threads, int runs, bool repack) {
  const auto weights = random_q4_0(rows, cols, 7);
  std::vector<float> x(cols * tokens), y(rows * tokens);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  ThreadPool pool(threads);
  MatmulScratch scratch;
  scratch.reserve(tokens, cols);
  MatrixView w{GgmlType::Q4_0, cols, rows, weights.data(), row_bytes(GgmlType::Q4_0, cols)};
  const std::vector<uint8_t> repacked = repack ? repack_for_matmul(w) : std::vector<uint8_t>();
  if (repack && repacked.empty()) return;
  if (repack) w.repacked = repacked.data();
  std::vector<double> times;
  for (int run = 0; run < runs + 1; ++run) {
    const auto start = std::chrono::steady_clock::now();
    matmul(w, x.data(), tokens, cols, y.data(), rows, pool, scratch);
    const double t = seconds_since(start);
    if (run > 0) times.push_back(t);
  }
  const double t = median(times), best = fastest(times);
  const double flops = 2.0 * rows * cols * tokens;
  std::printf("Q4_0 matmul%s rows=%-6lld cols=%-6lld tokens=%lld threads=%d  median %8.1f ms %6.1f GFLOP/s   best %6.1f GFLOP/s\n",
              repack ? " repacked" : "", static_cast<long long>(rows), static_cast<long long>(cols),
              static_cast<long long>(tokens), threads, t * 1e3, flops / t / 1e9, flops / best / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::printf("kernel set: %s, physical cores: %d (EMBER_KERNELS=scalar|avx2 to compare)\n",
              kernel_set_name(active_kernel_set()), ThreadPool::physical_core_count());
  const int matvec_runs = quick ? 5 : 21;
  for (bool repack : {false, true}) {
    for (int threads : {1, 2}) {
      bench_matvec(14336, 4096, threads, matvec_runs, repack);  // ffn_up/gate shape: 4096 in, 14336 out
      bench_matvec(4096, 14336, threads, matvec_runs, repack);  // ffn_down shape: 14336 in, 4096 out
    }
  }
  const int matmul_runs = quick ? 3 : 7;
  for (bool repack : {false, true}) {
    for (int threads : {1, 2}) bench_matmul(4096, 4096, 512, threads, matmul_runs, repack);
    bench_matmul(14336, 4096, 512, 2, quick ? 1 : 3, repack);
  }
  return 0;
}
