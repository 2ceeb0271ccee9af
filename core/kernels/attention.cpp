#include "core/kernels/attention.h"

#include "core/kernels/type_traits.h"

namespace ember {

#if defined(EMBER_HAVE_X86_SIMD)
void attention_head_f16_avx2(const AttentionHeadArgs& a);
#endif

void attention_head_f16(const AttentionHeadArgs& a) {
#if defined(EMBER_HAVE_X86_SIMD)
  if (active_kernel_set() == KernelSet::Avx2) {
    attention_head_f16_avx2(a);
    return;
  }
#endif
  attention_head_f16_reference(a);
}

}  // namespace ember
