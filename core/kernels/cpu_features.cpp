#include "core/kernels/cpu_features.h"

namespace ember {

bool cpu_has_avx2_fma_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  // __builtin_cpu_supports also checks that the OS saves the YMM state (XGETBV).
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                                __builtin_cpu_supports("f16c");
  return supported;
#else
  return false;
#endif
}

}  // namespace ember
