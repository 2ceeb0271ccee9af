#include "core/kernels/cpu_features.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

namespace ember {
namespace {

#if defined(__x86_64__) || defined(__i386__)
struct X86Features {
  bool avx2_fma_f16c = false;
  bool avx_vnni = false;
  bool avx512_vnni = false;
};

// Read with CPUID directly: __builtin_cpu_supports does not know "f16c" or "avxvnni" on every
// compiler Ember builds with.
X86Features detect() {
  X86Features f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool fma = ecx & (1u << 12), osxsave = ecx & (1u << 27), avx = ecx & (1u << 28), f16c = ecx & (1u << 29);
  if (!(fma && osxsave && avx && f16c)) return f;
  // The OS must save the XMM and YMM registers on context switches (XCR0 bits 1 and 2).
  uint32_t xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0x6) != 0x6) return f;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2_fma_f16c = ebx & (1u << 5);
  // AVX-512: F (ebx 16), DQ (17), BW (30), VL (31), VNNI (ecx 11); the OS must also save the
  // opmask and both ZMM halves (XCR0 bits 5, 6, 7).
  const uint32_t avx512_ebx = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);
  f.avx512_vnni = f.avx2_fma_f16c && (ebx & avx512_ebx) == avx512_ebx && (ecx & (1u << 11)) &&
                  (xcr0_lo & 0xE0) == 0xE0;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  f.avx_vnni = f.avx2_fma_f16c && (eax & (1u << 4));
  return f;
}

const X86Features& features() {
  static const X86Features f = detect();
  return f;
}
#endif

#if defined(__aarch64__)
// The bit values of the Linux uapi (asm/hwcap.h), spelled out because Android's NDK and older
// glibc headers lack some of them; the kernel's ABI never renumbers them.
constexpr unsigned long kHwcapAsimdHp = 1ul << 10;   // HWCAP_ASIMDHP
constexpr unsigned long kHwcapAsimdDp = 1ul << 20;   // HWCAP_ASIMDDP
constexpr unsigned long kHwcap2I8mm = 1ul << 13;     // HWCAP2_I8MM

struct ArmFeatures {
  bool dotprod = false;
  bool i8mm = false;
  bool fp16_arith = false;
};

ArmFeatures detect_arm() {
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  ArmFeatures f;
  f.dotprod = hwcap & kHwcapAsimdDp;
  f.i8mm = hwcap2 & kHwcap2I8mm;
  f.fp16_arith = hwcap & kHwcapAsimdHp;
  return f;
}

const ArmFeatures& arm_features() {
  static const ArmFeatures f = detect_arm();
  return f;
}
#endif

}  // namespace

bool cpu_has_avx2_fma_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  return features().avx2_fma_f16c;
#else
  return false;
#endif
}

bool cpu_has_avx_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  return features().avx_vnni;
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  return features().avx512_vnni;
#else
  return false;
#endif
}

bool cpu_has_neon() {
#if defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

bool cpu_has_dotprod() {
#if defined(__aarch64__)
  return arm_features().dotprod;
#else
  return false;
#endif
}

bool cpu_has_i8mm() {
#if defined(__aarch64__)
  return arm_features().i8mm && arm_features().dotprod;  // the i8mm kernels also use sdot
#else
  return false;
#endif
}

bool cpu_has_fp16_arith() {
#if defined(__aarch64__)
  return arm_features().fp16_arith;
#else
  return false;
#endif
}

}  // namespace ember
