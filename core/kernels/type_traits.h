#pragma once
// One traits entry per tensor type Ember computes with (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K):
// how to turn a row into floats, how to quantize floats into it, and the dot product of one of its
// rows with an activation row already converted to `vec_dot_type` (the same pairing ggml uses, so
// results match llama.cpp: Q4_0/Q8_0 dot Q8_0, Q4_K/Q6_K dot Q8_K, F16 dot F16, BF16 dot BF16,
// F32 dot F32). Each kernel set has such a table, and its sparse FFN kernels (sparse_kernels.h),
// in one list of sets in type_traits.cpp. The set is chosen once at run time: the best the CPU
// runs, or the one EMBER_KERNELS names (read once, by that choice). On CPUs with AVX-VNNI, matmul
// also uses VNNI variants of the Q4_0/Q8_0 decode and prefill kernels; EMBER_KERNELS=avx2 turns
// those off (for comparisons).
#include <cstdint>

#include "core/tensor/ggml_type.h"

namespace ember {

struct KernelTraits {
  GgmlType type;
  uint32_t block_size;
  uint32_t type_size;
  GgmlType vec_dot_type;
  // PRECONDITION for all: n is a multiple of block_size.
  void (*to_float)(const void* src, float* dst, int64_t n);
  void (*from_float)(const float* src, void* dst, int64_t n);  // quantize (reference rounding)
  float (*vec_dot)(int64_t n, const void* row, const void* act);  // act is of vec_dot_type
};

// In order of preference within each architecture (EMBER_KERNELS=NAME allows NAME, the sets of its
// architecture before it, and scalar). Avx512Vnni: the Avx2 table plus AVX-512 VNNI Q4_0 panel
// kernels (16-row panels) in matmul and AVX-512 sparse kernels; chosen when the CPU has AVX-512
// F/BW/VL/DQ/VNNI unless EMBER_KERNELS=avx2 or =scalar. Neon: ARMv8.0 Advanced SIMD (every
// aarch64 CPU); NeonDotprod: Neon with the integer dots on sdot (ARMv8.2 dot product extension).
enum class KernelSet { Scalar, Avx2, Avx512Vnni, Neon, NeonDotprod };

// The active kernel set's traits for a type, or nullptr when Ember cannot compute with it.
const KernelTraits* kernel_traits(GgmlType type);
// The scalar reference traits (tests compare the active set against these).
const KernelTraits* scalar_kernel_traits(GgmlType type);
// A given set's traits for a type, or nullptr when this build or this CPU cannot run that set or the
// set has no kernels for the type (tests run every set this way, whatever EMBER_KERNELS says).
const KernelTraits* kernel_traits_for(KernelSet set, GgmlType type);
// The active set. The first call of anything that needs it (kernel_traits too) reads EMBER_KERNELS;
// when the variable names no set they throw std::invalid_argument (parse_kernel_set's), every time.
KernelSet active_kernel_set();
// "scalar", "avx2", "avx512-vnni", "neon", "neon-dotprod": the names EMBER_KERNELS takes.
const char* kernel_set_name(KernelSet set);
// The set kernel_set_name() calls `name`; std::invalid_argument for any other name.
KernelSet parse_kernel_set(const char* name);

}  // namespace ember
