#include <cmath>

#include "core/kernels/attention.h"
#include "core/kernels/fp16.h"

namespace ember {

void attention_group_f16_reference(const AttentionGroupArgs& a) {
  const int64_t d = a.head_dim;
  for (int64_t i = 0; i < a.n_q * d; ++i) a.qf[i] = fp16_to_fp32(fp32_to_fp16(a.q[i]));
  for (int64_t j = 0; j < a.n_kv; ++j) {
    const uint16_t* kr = a.k + j * a.kv_stride;
    for (int64_t i = 0; i < d; ++i) a.row[i] = fp16_to_fp32(kr[i]);
    for (int64_t h = 0; h < a.n_q; ++h) {
      float s = 0.0f;
      for (int64_t i = 0; i < d; ++i) s += a.row[i] * a.qf[h * d + i];
      a.scores[h * a.n_kv + j] = s * a.scale;
    }
  }
  for (int64_t h = 0; h < a.n_q; ++h) {
    float* s = a.scores + h * a.n_kv;
    float m = s[0];
    for (int64_t j = 1; j < a.n_kv; ++j) m = s[j] > m ? s[j] : m;
    float sum = 0.0f;
    for (int64_t j = 0; j < a.n_kv; ++j) {
      s[j] = std::exp(s[j] - m);
      sum += s[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < a.n_kv; ++j) s[j] *= inv;
    for (int64_t i = 0; i < d; ++i) a.out[h * d + i] = 0.0f;
  }
  for (int64_t j = 0; j < a.n_kv; ++j) {
    const uint16_t* vr = a.v + j * a.kv_stride;
    for (int64_t i = 0; i < d; ++i) a.row[i] = fp16_to_fp32(vr[i]);
    for (int64_t h = 0; h < a.n_q; ++h) {
      const float p = a.scores[h * a.n_kv + j];
      for (int64_t i = 0; i < d; ++i) a.out[h * d + i] += p * a.row[i];
    }
  }
}

}  // namespace ember
