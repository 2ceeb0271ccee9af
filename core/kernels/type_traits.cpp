#include "core/kernels/type_traits.h"

#include <array>
#include <cstdlib>
#include <cstring>

#include "core/kernels/cpu_features.h"
#include "core/kernels/kernel_impl.h"

namespace ember {
namespace {

constexpr size_t kTableSize = 8;
using Table = std::array<KernelTraits, kTableSize>;

// Q8_K is not a weight type Ember reads from files, but matmul needs its quantizer for the
// activations of Q4_K/Q6_K products, so it has an entry (with a scalar dot for completeness).
constexpr Table kScalarTable{{
    {GgmlType::F32, 1, 4, GgmlType::F32, generic::to_float_f32, generic::from_float_f32, generic::vec_dot_f32},
    {GgmlType::F16, 1, 2, GgmlType::F16, generic::to_float_f16, generic::from_float_f16, generic::vec_dot_f16},
    {GgmlType::BF16, 1, 2, GgmlType::BF16, generic::to_float_bf16, generic::from_float_bf16, generic::vec_dot_bf16},
    {GgmlType::Q8_0, 32, 34, GgmlType::Q8_0, generic::to_float_q8_0, generic::from_float_q8_0,
     generic::vec_dot_q8_0_q8_0},
    {GgmlType::Q4_0, 32, 18, GgmlType::Q8_0, generic::to_float_q4_0, generic::from_float_q4_0,
     generic::vec_dot_q4_0_q8_0},
    {GgmlType::Q4_K, 256, 144, GgmlType::Q8_K, generic::to_float_q4_K, generic::from_float_q4_K,
     generic::vec_dot_q4_K_q8_K},
    {GgmlType::Q6_K, 256, 210, GgmlType::Q8_K, generic::to_float_q6_K, generic::from_float_q6_K,
     generic::vec_dot_q6_K_q8_K},
    {GgmlType::Q8_K, 256, 292, GgmlType::Q8_K, generic::to_float_q8_K, generic::from_float_q8_K,
     generic::vec_dot_q8_K_q8_K},
}};

#ifdef EMBER_HAVE_X86_SIMD
// Weight quantizers stay scalar (they run once, when a file is written, and must be the
// reference); the Q8_0 activation quantizer is the SIMD one llama.cpp also runs on x86.
constexpr Table kAvx2Table{{
    {GgmlType::F32, 1, 4, GgmlType::F32, generic::to_float_f32, generic::from_float_f32, avx2::vec_dot_f32},
    {GgmlType::F16, 1, 2, GgmlType::F16, avx2::to_float_f16, avx2::from_float_f16, avx2::vec_dot_f16},
    {GgmlType::BF16, 1, 2, GgmlType::BF16, generic::to_float_bf16, generic::from_float_bf16, avx2::vec_dot_bf16},
    {GgmlType::Q8_0, 32, 34, GgmlType::Q8_0, generic::to_float_q8_0, avx2::from_float_q8_0,
     avx2::vec_dot_q8_0_q8_0},
    {GgmlType::Q4_0, 32, 18, GgmlType::Q8_0, avx2::to_float_q4_0, generic::from_float_q4_0,
     avx2::vec_dot_q4_0_q8_0},
    {GgmlType::Q4_K, 256, 144, GgmlType::Q8_K, generic::to_float_q4_K, generic::from_float_q4_K,
     avx2::vec_dot_q4_K_q8_K},
    {GgmlType::Q6_K, 256, 210, GgmlType::Q8_K, generic::to_float_q6_K, generic::from_float_q6_K,
     avx2::vec_dot_q6_K_q8_K},
    {GgmlType::Q8_K, 256, 292, GgmlType::Q8_K, generic::to_float_q8_K, generic::from_float_q8_K,
     generic::vec_dot_q8_K_q8_K},
}};
#endif

KernelSet choose_kernel_set() {
  const char* forced = std::getenv("EMBER_KERNELS");
  if (forced != nullptr && std::strcmp(forced, "scalar") == 0) return KernelSet::Scalar;
#ifdef EMBER_HAVE_X86_SIMD
  if (cpu_has_avx2_fma_f16c()) return KernelSet::Avx2;
#endif
  return KernelSet::Scalar;
}

#ifdef EMBER_HAVE_X86_SIMD
// AVX-VNNI tiles unless EMBER_KERNELS=avx2 asks for the plain AVX2 ones (read once).
bool use_vnni() {
  static const bool use = [] {
    const char* forced = std::getenv("EMBER_KERNELS");
    return !(forced != nullptr && std::strcmp(forced, "avx2") == 0) && cpu_has_avx_vnni();
  }();
  return use;
}
#endif

const KernelTraits* find(const Table& table, GgmlType type) {
  for (const KernelTraits& t : table) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

const Table& active_table() {
#ifdef EMBER_HAVE_X86_SIMD
  if (active_kernel_set() == KernelSet::Avx2) return kAvx2Table;
#endif
  return kScalarTable;
}

}  // namespace

KernelSet active_kernel_set() {
  static const KernelSet set = choose_kernel_set();  // EMBER_KERNELS is read once, here
  return set;
}

const char* kernel_set_name(KernelSet set) {
  switch (set) {
    case KernelSet::Scalar: return "scalar";
    case KernelSet::Avx2: return "avx2";
  }
  return "unknown";
}

const KernelTraits* kernel_traits(GgmlType type) { return find(active_table(), type); }

const KernelTraits* scalar_kernel_traits(GgmlType type) { return find(kScalarTable, type); }

GemmTileFn gemm_tile_kernel(uint32_t type_id) {
#ifdef EMBER_HAVE_X86_SIMD
  if (active_kernel_set() == KernelSet::Avx2) {
    if (type_id == static_cast<uint32_t>(GgmlType::Q4_0)) {
      return use_vnni() ? avx2::gemm_tile_q4_0_q8_0_vnni : avx2::gemm_tile_q4_0_q8_0;
    }
    if (type_id == static_cast<uint32_t>(GgmlType::Q8_0)) {
      return use_vnni() ? avx2::gemm_tile_q8_0_q8_0_vnni : avx2::gemm_tile_q8_0_q8_0;
    }
  }
#endif
  return nullptr;
}

GemvRowsFn gemv_rows_kernel(uint32_t type_id) {
#ifdef EMBER_HAVE_X86_SIMD
  if (active_kernel_set() == KernelSet::Avx2 && use_vnni()) {
    if (type_id == static_cast<uint32_t>(GgmlType::Q4_0)) return avx2::gemv_q4_0_q8_0_vnni;
    if (type_id == static_cast<uint32_t>(GgmlType::Q8_0)) return avx2::gemv_q8_0_q8_0_vnni;
  }
#endif
  return nullptr;
}

PanelGemmFn q4_0_panel_kernel() {
#ifdef EMBER_HAVE_X86_SIMD
  if (active_kernel_set() == KernelSet::Avx2) return use_vnni() ? avx2::panel_gemm_q4_0_vnni : avx2::panel_gemm_q4_0_avx2;
#endif
  return nullptr;
}

}  // namespace ember
