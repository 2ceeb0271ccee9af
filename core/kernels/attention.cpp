#include "core/kernels/attention.h"

#include "core/kernels/type_traits.h"

namespace ember {

#if defined(EMBER_HAVE_X86_SIMD)
void attention_group_f16_avx2(const AttentionGroupArgs& a);
#endif
#if defined(EMBER_HAVE_ARM_NEON)
namespace neon {
void attention_group_f16(const AttentionGroupArgs& a);  // arm/attention_neon.cpp
}
#endif

void attention_group_f16(const AttentionGroupArgs& a) {
#if defined(EMBER_HAVE_X86_SIMD)
  if (active_kernel_set() != KernelSet::Scalar) {
    attention_group_f16_avx2(a);
    return;
  }
#endif
#if defined(EMBER_HAVE_ARM_NEON)
  if (active_kernel_set() != KernelSet::Scalar) {
    neon::attention_group_f16(a);
    return;
  }
#endif
  attention_group_f16_reference(a);
}

}  // namespace ember
