#include "core/kernels/type_traits.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/kernels/cpu_features.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/sparse_kernels.h"

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

#ifdef EMBER_HAVE_ARM_NEON
// As on x86: weight quantizers stay the reference; the activation quantizer is NEON (llama.cpp's
// ARM rounding, ties to even). The dotprod table differs only in the integer dots.
constexpr Table kNeonTable{{
    {GgmlType::F32, 1, 4, GgmlType::F32, generic::to_float_f32, generic::from_float_f32, neon::vec_dot_f32},
    {GgmlType::F16, 1, 2, GgmlType::F16, neon::to_float_f16, neon::from_float_f16, neon::vec_dot_f16},
    {GgmlType::BF16, 1, 2, GgmlType::BF16, generic::to_float_bf16, generic::from_float_bf16, neon::vec_dot_bf16},
    {GgmlType::Q8_0, 32, 34, GgmlType::Q8_0, generic::to_float_q8_0, neon::from_float_q8_0,
     neon::vec_dot_q8_0_q8_0},
    {GgmlType::Q4_0, 32, 18, GgmlType::Q8_0, neon::to_float_q4_0, generic::from_float_q4_0,
     neon::vec_dot_q4_0_q8_0},
    {GgmlType::Q4_K, 256, 144, GgmlType::Q8_K, generic::to_float_q4_K, generic::from_float_q4_K,
     neon::vec_dot_q4_K_q8_K},
    {GgmlType::Q6_K, 256, 210, GgmlType::Q8_K, generic::to_float_q6_K, generic::from_float_q6_K,
     neon::vec_dot_q6_K_q8_K},
    {GgmlType::Q8_K, 256, 292, GgmlType::Q8_K, generic::to_float_q8_K, generic::from_float_q8_K,
     generic::vec_dot_q8_K_q8_K},
}};
constexpr Table kNeonDotprodTable{{
    kNeonTable[0],
    kNeonTable[1],
    kNeonTable[2],
    {GgmlType::Q8_0, 32, 34, GgmlType::Q8_0, generic::to_float_q8_0, neon::from_float_q8_0,
     neon::vec_dot_q8_0_q8_0_dotprod},
    {GgmlType::Q4_0, 32, 18, GgmlType::Q8_0, neon::to_float_q4_0, generic::from_float_q4_0,
     neon::vec_dot_q4_0_q8_0_dotprod},
    {GgmlType::Q4_K, 256, 144, GgmlType::Q8_K, generic::to_float_q4_K, generic::from_float_q4_K,
     neon::vec_dot_q4_K_q8_K_dotprod},
    {GgmlType::Q6_K, 256, 210, GgmlType::Q8_K, generic::to_float_q6_K, generic::from_float_q6_K,
     neon::vec_dot_q6_K_q8_K_dotprod},
    kNeonTable[7],
}};
#endif

// The sparse FFN's kernels of each set (sparse_kernels.h), in SparseKernels' member order.
constexpr SparseKernels kScalarSparse{generic::axpy_f32,       generic::axpy_f16,
                                      generic::axpy_q4_0,      generic::axpy_q8_0,
                                      generic::axpy_q4_0_rows, generic::dot_q4_0_prepared,
                                      generic::dot_q4_0_prepared_rows};
#ifdef EMBER_HAVE_X86_SIMD
constexpr SparseKernels kAvx2Sparse{avx2::axpy_f32,       avx2::axpy_f16,          avx2::axpy_q4_0,
                                    avx2::axpy_q8_0,      avx2::axpy_q4_0_rows,    avx2::dot_q4_0_prepared,
                                    avx2::dot_q4_0_prepared_rows};
#ifdef EMBER_HAVE_X86_AVX512
constexpr SparseKernels kAvx512Sparse{avx2::axpy_f32,         avx2::axpy_f16,           avx512::axpy_q4_0,
                                      avx512::axpy_q8_0,      avx512::axpy_q4_0_rows,   avx512::dot_q4_0_prepared,
                                      avx512::dot_q4_0_prepared_rows};
#endif
#endif
#ifdef EMBER_HAVE_ARM_NEON
constexpr SparseKernels kNeonSparse{neon::axpy_f32,       neon::axpy_f16,          neon::axpy_q4_0,
                                    neon::axpy_q8_0,      neon::axpy_q4_0_rows,    neon::dot_q4_0_prepared,
                                    neon::dot_q4_0_prepared_rows};
// The axpys have no integer dot: only the prepared Q4_0 dots change.
constexpr SparseKernels kNeonDotprodSparse{neon::axpy_f32,
                                           neon::axpy_f16,
                                           neon::axpy_q4_0,
                                           neon::axpy_q8_0,
                                           neon::axpy_q4_0_rows,
                                           neon::dot_q4_0_prepared_dotprod,
                                           neon::dot_q4_0_prepared_rows_dotprod};
#endif

bool any_cpu() { return true; }

// One entry per kernel set this build has: whether the CPU can run it, and its tables. The
// matmul-only kernels (register tiles, panels) are looked up by set in the functions below.
struct KernelSetEntry {
  KernelSet set;
  bool (*cpu_can_run)();
  const Table* traits;
  const SparseKernels* sparse;
};

constexpr KernelSetEntry kSets[] = {
    {KernelSet::Scalar, any_cpu, &kScalarTable, &kScalarSparse},
#ifdef EMBER_HAVE_X86_SIMD
    {KernelSet::Avx2, cpu_has_avx2_fma_f16c, &kAvx2Table, &kAvx2Sparse},
#ifdef EMBER_HAVE_X86_AVX512
    // The AVX2 traits: AVX-512 only adds Q4_0 panels to matmul and its own sparse kernels.
    {KernelSet::Avx512Vnni, cpu_has_avx512_vnni, &kAvx2Table, &kAvx512Sparse},
#endif
#endif
#ifdef EMBER_HAVE_ARM_NEON
    {KernelSet::Neon, cpu_has_neon, &kNeonTable, &kNeonSparse},
    {KernelSet::NeonDotprod, cpu_has_dotprod, &kNeonDotprodTable, &kNeonDotprodSparse},
#endif
};

// Every set there is, built here or not: EMBER_KERNELS accepts all their names on every build.
constexpr KernelSet kAllSets[] = {KernelSet::Scalar, KernelSet::Avx2, KernelSet::Avx512Vnni, KernelSet::Neon,
                                  KernelSet::NeonDotprod};

bool is_arm(KernelSet set) { return set == KernelSet::Neon || set == KernelSet::NeonDotprod; }

// Whether EMBER_KERNELS=ceiling allows `set`: scalar always, otherwise the sets of the same
// architecture up to the one named (so "neon" on x86, or "avx2" on ARM, means scalar).
bool allowed_under(KernelSet set, KernelSet ceiling) {
  return set == KernelSet::Scalar || (is_arm(set) == is_arm(ceiling) && set <= ceiling);
}

const KernelSetEntry* runnable_entry(KernelSet set) {
  for (const KernelSetEntry& e : kSets) {
    if (e.set == set) return e.cpu_can_run() ? &e : nullptr;
  }
  return nullptr;
}

// The one kernel choice of the process.
struct KernelChoice {
  const KernelSetEntry* entry;
  // AVX-VNNI variants of the AVX2 Q4_0/Q8_0 tiles and rows (a CPU feature within the x86 sets, not
  // a set of its own); off when EMBER_KERNELS asks for avx2 or below, for comparisons.
  bool avx_vnni;
  // Likewise on ARM: the i8mm (smmla) Q4_0 panels within neon-dotprod, on whenever that set runs
  // and the CPU has i8mm (the tests call the sdot panels directly to compare).
  bool i8mm;
};

// The only place EMBER_KERNELS is read. Unset or empty: the best set this CPU runs (one
// architecture's sets are built at most). Otherwise the best set allowed under the one named
// (allowed_under), so a set the CPU lacks falls back to the next one down; an unknown name throws.
KernelChoice choose() {
  const char* forced = std::getenv("EMBER_KERNELS");
  const bool is_forced = forced != nullptr && *forced != '\0';
  const KernelSet ceiling = is_forced ? parse_kernel_set(forced) : KernelSet::Scalar;
  const KernelSetEntry* best = &kSets[0];
  for (const KernelSetEntry& e : kSets) {
    if ((!is_forced || allowed_under(e.set, ceiling)) && e.set > best->set && e.cpu_can_run()) best = &e;
  }
  const bool x86_simd = best->set == KernelSet::Avx2 || best->set == KernelSet::Avx512Vnni;
  return {best, (!is_forced || ceiling > KernelSet::Avx2) && x86_simd && cpu_has_avx_vnni(),
          best->set == KernelSet::NeonDotprod && cpu_has_i8mm()};
}

const KernelChoice& choice() {
  static const KernelChoice c = choose();
  return c;
}

#ifdef EMBER_HAVE_X86_SIMD
bool use_vnni() { return choice().avx_vnni; }
#endif

const KernelTraits* find(const Table& table, GgmlType type) {
  for (const KernelTraits& t : table) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

// Any x86 SIMD set (the AVX-512 set keeps the AVX2 table for everything but Q4_0 panels).
[[maybe_unused]] bool simd_set() {
  return active_kernel_set() == KernelSet::Avx2 || active_kernel_set() == KernelSet::Avx512Vnni;
}

const Table& active_table() { return *choice().entry->traits; }

}  // namespace

KernelSet active_kernel_set() { return choice().entry->set; }

KernelSet parse_kernel_set(const char* name) {
  for (KernelSet set : kAllSets) {
    if (std::strcmp(name, kernel_set_name(set)) == 0) return set;
  }
  throw std::invalid_argument(std::string("EMBER_KERNELS=") + name +
                              ": unknown kernel set (expected scalar, avx2, avx512-vnni, neon or neon-dotprod)");
}

const char* kernel_set_name(KernelSet set) {
  switch (set) {
    case KernelSet::Scalar: return "scalar";
    case KernelSet::Avx2: return "avx2";
    case KernelSet::Avx512Vnni: return "avx512-vnni";
    case KernelSet::Neon: return "neon";
    case KernelSet::NeonDotprod: return "neon-dotprod";
  }
  return "unknown";
}

const KernelTraits* kernel_traits(GgmlType type) { return find(active_table(), type); }

const KernelTraits* scalar_kernel_traits(GgmlType type) { return find(kScalarTable, type); }

const KernelTraits* kernel_traits_for(KernelSet set, GgmlType type) {
  const KernelSetEntry* e = runnable_entry(set);
  return e != nullptr ? find(*e->traits, type) : nullptr;
}

const SparseKernels& sparse_kernels() { return *choice().entry->sparse; }

const SparseKernels* sparse_kernels_for(KernelSet set) {
  const KernelSetEntry* e = runnable_entry(set);
  return e != nullptr ? e->sparse : nullptr;
}

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
#ifdef EMBER_HAVE_ARM_NEON
  const bool dotprod = active_kernel_set() == KernelSet::NeonDotprod;
  if (active_kernel_set() == KernelSet::Neon || dotprod) {
    if (type_id == static_cast<uint32_t>(GgmlType::Q4_0)) {
      return dotprod ? neon::gemm_tile_q4_0_q8_0_dotprod : neon::gemm_tile_q4_0_q8_0;
    }
    if (type_id == static_cast<uint32_t>(GgmlType::Q8_0)) {
      return dotprod ? neon::gemm_tile_q8_0_q8_0_dotprod : neon::gemm_tile_q8_0_q8_0;
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
#ifdef EMBER_HAVE_ARM_NEON
  const bool dotprod = active_kernel_set() == KernelSet::NeonDotprod;
  if (active_kernel_set() == KernelSet::Neon || dotprod) {
    if (type_id == static_cast<uint32_t>(GgmlType::Q4_0)) return dotprod ? neon::gemv_q4_0_q8_0_dotprod : neon::gemv_q4_0_q8_0;
    if (type_id == static_cast<uint32_t>(GgmlType::Q8_0)) return dotprod ? neon::gemv_q8_0_q8_0_dotprod : neon::gemv_q8_0_q8_0;
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
  static const Q4_0Panels kVnni{8, 4, avx2::repack_q4_0_panel8, avx2::panel_gemm_q4_0_vnni, avx2::q8_0_bias_sums};
  static const Q4_0Panels kAvx2{8, 4, avx2::repack_q4_0_panel8, avx2::panel_gemm_q4_0_avx2, avx2::q8_0_bias_sums};
#ifdef EMBER_HAVE_X86_AVX512
  static const Q4_0Panels kAvx512{16, 8, avx512::repack_q4_0_panel16, avx512::panel16_gemm_q4_0, avx2::q8_0_bias_sums};
  if (active_kernel_set() == KernelSet::Avx512Vnni) return &kAvx512;
#endif
  if (simd_set()) return use_vnni() ? &kVnni : &kAvx2;
#endif
#ifdef EMBER_HAVE_ARM_NEON
  // One layout for both kernels (arm/q4_0_panel.h), so a copy repacked under either serves both.
  static const Q4_0Panels kI8mm{4, 4, neon::repack_q4_0_panel4, neon::panel_gemm_q4_0_i8mm};
  static const Q4_0Panels kDotprod{4, 4, neon::repack_q4_0_panel4, neon::panel_gemm_q4_0_dotprod};
  if (active_kernel_set() == KernelSet::NeonDotprod) return choice().i8mm ? &kI8mm : &kDotprod;
#endif
  return nullptr;
}

}  // namespace ember
