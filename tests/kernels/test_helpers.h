#pragma once
// Random data and quantization helpers for the kernel tests.
#include <cstdint>
#include <random>
#include <vector>

#include "core/kernels/type_traits.h"

namespace ember::test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline uint64_t bytes_for(const KernelTraits& t, int64_t n) { return static_cast<uint64_t>(n / t.block_size) * t.type_size; }

inline std::vector<uint8_t> quantize(const KernelTraits& t, const std::vector<float>& x) {
  std::vector<uint8_t> out(bytes_for(t, static_cast<int64_t>(x.size())));
  t.from_float(x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

inline const GgmlType kComputeTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                                         GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K};

// Every kernel set there is; tests keep those this build and CPU run (kernel_traits_for,
// sparse_kernels_for) and compare each against the scalar reference.
inline const KernelSet kAllKernelSets[] = {KernelSet::Scalar, KernelSet::Avx2, KernelSet::Avx512Vnni, KernelSet::Neon,
                                           KernelSet::NeonDotprod};

}  // namespace ember::test
