// AVX2/F16C version of attention_group_f16: the same three passes as the reference (scores,
// softmax, weighted sum of values), 8 lanes at a time, with a polynomial exp.
#include <immintrin.h>

#include <cmath>

#include "core/kernels/attention.h"
#include "core/kernels/fp16.h"

namespace ember {
namespace {

// e^x for x <= 0 (softmax arguments), relative error ~2e-7: x = n ln2 + r, |r| <= ln2/2,
// e^r by a degree-6 Taylor polynomial, 2^n through the exponent bits. Arguments below -87
// flush to 0, as expf underflows there too.
__m256 exp_avx2(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.0f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_max_ps(x, lo);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 result = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(underflow, result);
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void convert_row(const uint16_t* src, float* dst, int64_t d) {
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < d; ++i) dst[i] = fp16_to_fp32(src[i]);
}

}  // namespace

void attention_group_f16_avx2(const AttentionGroupArgs& a) {
  const int64_t d = a.head_dim, d8 = d & ~int64_t{7};
  for (int64_t i = 0; i < a.n_q * d; ++i) a.qf[i] = fp16_to_fp32(fp32_to_fp16(a.q[i]));

  // Scores: each key row converted once, dotted with every query of the group.
  for (int64_t j = 0; j < a.n_kv; ++j) {
    convert_row(a.k + j * a.kv_stride, a.row, d);
    for (int64_t h = 0; h < a.n_q; ++h) {
      const float* q = a.qf + h * d;
      __m256 acc = _mm256_setzero_ps();
      for (int64_t i = 0; i < d8; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a.row + i), _mm256_loadu_ps(q + i), acc);
      float s = hsum(acc);
      for (int64_t i = d8; i < d; ++i) s += a.row[i] * q[i];
      a.scores[h * a.n_kv + j] = s * a.scale;
    }
  }

  // Softmax per query head.
  const int64_t n8 = a.n_kv & ~int64_t{7};
  for (int64_t h = 0; h < a.n_q; ++h) {
    float* s = a.scores + h * a.n_kv;
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n8; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(s + j));
    float m = hmax(vm);
    for (int64_t j = n8; j < a.n_kv; ++j) m = s[j] > m ? s[j] : m;
    const __m256 mm = _mm256_set1_ps(m);
    __m256 vsum = _mm256_setzero_ps();
    for (int64_t j = 0; j < n8; j += 8) {
      const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), mm));
      _mm256_storeu_ps(s + j, e);
      vsum = _mm256_add_ps(vsum, e);
    }
    float sum = hsum(vsum);
    for (int64_t j = n8; j < a.n_kv; ++j) {
      s[j] = std::exp(s[j] - m);
      sum += s[j];
    }
    const __m256 inv = _mm256_set1_ps(1.0f / sum);
    for (int64_t j = 0; j < n8; j += 8) _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), inv));
    for (int64_t j = n8; j < a.n_kv; ++j) s[j] *= 1.0f / sum;
    for (int64_t i = 0; i < d; ++i) a.out[h * d + i] = 0.0f;
  }

  // Weighted sum of values: each value row converted once, accumulated into every head.
  for (int64_t j = 0; j < a.n_kv; ++j) {
    convert_row(a.v + j * a.kv_stride, a.row, d);
    for (int64_t h = 0; h < a.n_q; ++h) {
      float* o = a.out + h * d;
      const float pj = a.scores[h * a.n_kv + j];
      const __m256 p = _mm256_set1_ps(pj);
      for (int64_t i = 0; i < d8; i += 8) {
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(p, _mm256_loadu_ps(a.row + i), _mm256_loadu_ps(o + i)));
      }
      for (int64_t i = d8; i < d; ++i) o[i] += pj * a.row[i];
    }
  }
}

}  // namespace ember
