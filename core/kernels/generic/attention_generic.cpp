#include <cmath>
#include <limits>

#include "core/kernels/attention.h"
#include "core/kernels/fp16.h"

namespace ember {

void attention_head_f16_reference(const AttentionHeadArgs& a) {
  const int64_t d = a.head_dim;
  uint16_t* q16 = a.scratch;
  uint16_t* acc = a.scratch + d;
  for (int64_t i = 0; i < d; ++i) {
    q16[i] = fp32_to_fp16(a.q[i]);
    acc[i] = 0;
  }
  float m = -std::numeric_limits<float>::infinity();
  float s_sum = 0.0f;
  for (int64_t j = 0; j < a.n_kv; ++j) {
    const uint16_t* kr = a.k + j * a.kv_stride;
    double dot = 0.0;
    for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(fp16_to_fp32(kr[i]) * fp16_to_fp32(q16[i]));
    const float s = static_cast<float>(dot) * a.scale;
    float ms = 1.0f, vs = 1.0f;
    if (s > m) {
      const float m_old = m;
      m = s;
      ms = std::exp(m_old - m);
      for (int64_t i = 0; i < d; ++i) acc[i] = fp32_to_fp16(fp16_to_fp32(acc[i]) * ms);
    } else {
      vs = std::exp(s - m);
    }
    const uint16_t* vr = a.v + j * a.kv_stride;
    for (int64_t i = 0; i < d; ++i) acc[i] = fp32_to_fp16(fp16_to_fp32(acc[i]) + fp16_to_fp32(vr[i]) * vs);
    s_sum = s_sum * ms + vs;
  }
  const float inv = s_sum == 0.0f ? 0.0f : 1.0f / s_sum;
  for (int64_t i = 0; i < d; ++i) a.out[i] = fp16_to_fp32(acc[i]) * inv;
}

}  // namespace ember
