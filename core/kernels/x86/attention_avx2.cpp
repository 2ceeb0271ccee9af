// AVX2/F16C version of attention_head_f16: same arithmetic as the reference, 8 lanes at a time
// (F32 lanes for the score dot, F16 storage for the value accumulator).
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "core/kernels/attention.h"
#include "core/kernels/fp16.h"

namespace ember {

namespace {

float dot_f16_avx2(const uint16_t* x, const uint16_t* y, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 y0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    const __m256 x1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 8)));
    const __m256 y1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i + 8)));
    acc0 = _mm256_fmadd_ps(x0, y0, acc0);
    acc1 = _mm256_fmadd_ps(x1, y1, acc1);
  }
  acc0 = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  double sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
  return static_cast<float>(sum);
}

// acc = fp16(acc * scale_acc + v * scale_v), 8 lanes at a time.
void scale_mad_f16_avx2(uint16_t* acc, const uint16_t* v, float scale_acc, float scale_v, int64_t n, bool rescale) {
  const __m256 sa = _mm256_set1_ps(scale_acc), sv = _mm256_set1_ps(scale_v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(acc + i)));
    if (rescale) {  // rounded to F16 between the two steps, as the reference does
      a = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(a, sa), _MM_FROUND_TO_NEAREST_INT));
    }
    const __m256 vv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)));
    a = _mm256_fmadd_ps(vv, sv, a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(acc + i), _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) {
    float a = fp16_to_fp32(acc[i]);
    if (rescale) a = fp16_to_fp32(fp32_to_fp16(a * scale_acc));
    acc[i] = fp32_to_fp16(a + fp16_to_fp32(v[i]) * scale_v);
  }
}

}  // namespace

void attention_head_f16_avx2(const AttentionHeadArgs& a) {
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
    const float s = dot_f16_avx2(a.k + j * a.kv_stride, q16, d) * a.scale;
    float ms = 1.0f, vs = 1.0f;
    bool rescale = false;
    if (s > m) {
      const float m_old = m;
      m = s;
      ms = std::exp(m_old - m);
      rescale = true;
    } else {
      vs = std::exp(s - m);
    }
    scale_mad_f16_avx2(acc, a.v + j * a.kv_stride, ms, vs, d, rescale);
    s_sum = s_sum * ms + vs;
  }
  const float inv = s_sum == 0.0f ? 0.0f : 1.0f / s_sum;
  for (int64_t i = 0; i < d; ++i) a.out[i] = fp16_to_fp32(acc[i]) * inv;
}

}  // namespace ember
