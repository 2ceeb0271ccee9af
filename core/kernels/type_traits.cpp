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
  const bool forced_avx2 = forced != nullptr && std::strcmp(forced, "avx2") == 0;
#ifdef EMBER_HAVE_X86_AVX512
  if (!forced_avx2 && cpu_has_avx512_vnni()) return KernelSet::Avx512Vnni;
#endif
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

// Any x86 SIMD set (the AVX-512 set keeps the AVX2 table for everything but Q4_0 panels).
[[maybe_unused]] bool simd_set() { return active_kernel_set() != KernelSet::Scalar; }

const Table& active_table() {
#ifdef EMBER_HAVE_X86_SIMD
  if (simd_set()) return kAvx2Table;
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
    case KernelSet::Avx512Vnni: return "avx512-vnni";
  }
  return "unknown";
}

const KernelTraits* kernel_traits(GgmlType type) { return find(active_table(), type); }

const KernelTraits* scalar_kernel_traits(GgmlType type) { return find(kScalarTable, type); }

GemmTileFn gemm_tile_kernel(uint32_t type_id) {
#ifdef EMBER_HAVE_X86_SIMD
  if (simd_set()) {
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
  if (simd_set() && use_vnni()) {
    if (type_id == static_cast<uint32_t>(GgmlType::Q4_0)) return avx2::gemv_q4_0_q8_0_vnni;
    if (type_id == static_cast<uint32_t>(GgmlType::Q8_0)) return avx2::gemv_q8_0_q8_0_vnni;
  }
#endif
  return nullptr;
}

PanelGemmFn q4_0_panel_kernel() {
  const Q4_0Panels* panels = q4_0_panels();
  return panels != nullptr ? panels->gemm : nullptr;
}

const Q4_0Panels* q4_0_panels() {
#ifdef EMBER_HAVE_X86_SIMD
  static const Q4_0Panels kVnni{8, 4, avx2::repack_q4_0_panel8, avx2::panel_gemm_q4_0_vnni};
  static const Q4_0Panels kAvx2{8, 4, avx2::repack_q4_0_panel8, avx2::panel_gemm_q4_0_avx2};
#ifdef EMBER_HAVE_X86_AVX512
  static const Q4_0Panels kAvx512{16, 8, avx512::repack_q4_0_panel16, avx512::panel16_gemm_q4_0};
  if (active_kernel_set() == KernelSet::Avx512Vnni) return &kAvx512;
#endif
  if (simd_set()) return use_vnni() ? &kVnni : &kAvx2;
#endif
  return nullptr;
}

}  // namespace ember
