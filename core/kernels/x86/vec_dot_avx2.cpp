// AVX2/FMA dot products; each has a scalar twin in generic/vec_dot_generic.cpp that the tests
// compare it against.
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/x86/avx2_helpers.h"

namespace ember::avx2 {

float vec_dot_f32(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const float*>(row);
  const auto* x = static_cast<const float*>(act);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8 * k), _mm256_loadu_ps(x + i + 8 * k), acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc[0]);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

float vec_dot_f16(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const uint16_t*>(row);
  const auto* x = static_cast<const uint16_t*>(act);
  auto load = [](const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); };
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_fmadd_ps(load(w + i + 8 * k), load(x + i + 8 * k), acc[k]);
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load(w + i), load(x + i), acc[0]);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += _cvtsh_ss(w[i]) * _cvtsh_ss(x[i]);
  return sum;
}

float vec_dot_bf16(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const uint16_t*>(row);
  const auto* x = static_cast<const uint16_t*>(act);
  auto load = [](const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  };
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc[0] = _mm256_fmadd_ps(load(w + i), load(x + i), acc[0]);
    acc[1] = _mm256_fmadd_ps(load(w + i + 8), load(x + i + 8), acc[1]);
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load(w + i), load(x + i), acc[0]);
  float sum = hsum(_mm256_add_ps(acc[0], acc[1]));
  auto bf = [](uint16_t h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
  };
  for (; i < n; ++i) sum += bf(w[i]) * bf(x[i]);
  return sum;
}

float vec_dot_q4_0_q8_0(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q4_0*>(row);
  const auto* x = static_cast<const block_q8_0*>(act);
  const int64_t nb = n / kQK4_0;
  const __m256i offset = _mm256_set1_epi8(8);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  // Two blocks per iteration on independent accumulators hide the FMA latency.
  for (; b + 2 <= nb; b += 2) {
    const __m256i q0 = _mm256_sub_epi8(unpack_nibbles(w[b].qs), offset);
    const __m256i q1 = _mm256_sub_epi8(unpack_nibbles(w[b + 1].qs), offset);
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b + 1].qs));
    const __m256 d0 = _mm256_set1_ps(half_to_float(w[b].d) * half_to_float(x[b].d));
    const __m256 d1 = _mm256_set1_ps(half_to_float(w[b + 1].d) * half_to_float(x[b + 1].d));
    acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(dot_i8_pairs(q0, a0)), acc0);
    acc1 = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(dot_i8_pairs(q1, a1)), acc1);
  }
  for (; b < nb; ++b) {
    const __m256i q = _mm256_sub_epi8(unpack_nibbles(w[b].qs), offset);
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256 d = _mm256_set1_ps(half_to_float(w[b].d) * half_to_float(x[b].d));
    acc0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8_pairs(q, a)), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

float vec_dot_q8_0_q8_0(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q8_0*>(row);
  const auto* x = static_cast<const block_q8_0*>(act);
  const int64_t nb = n / kQK8_0;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256 d = _mm256_set1_ps(half_to_float(w[b].d) * half_to_float(x[b].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8_pairs(q, a)), acc);
  }
  return hsum(acc);
}

float vec_dot_q4_K_q8_K(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q4_K*>(row);
  const auto* x = static_cast<const block_q8_K*>(act);
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  float min_terms = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint8_t scale[8], min[8];
    for (int j = 0; j < 8; ++j) q4_K_scale_min(j, w[b].scales, scale[j], min[j]);
    int min_sum = 0;
    for (int j = 0; j < 8; ++j) min_sum += min[j] * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
    min_terms += x[b].d * half_to_float(w[b].dmin) * min_sum;

    __m256i isum = _mm256_setzero_si256();
    const uint8_t* q = w[b].qs;
    const int8_t* a = x[b].qs;
    for (int chunk = 0; chunk < 4; ++chunk, q += 32, a += 64) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
      const __m256i q_lo = _mm256_and_si256(bits, low_nibbles);
      const __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low_nibbles);
      // Weights are unsigned 0..15 here, so maddubs takes them directly (no sign trick).
      const __m256i p_lo = _mm256_maddubs_epi16(q_lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)));
      const __m256i p_hi = _mm256_maddubs_epi16(q_hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 32)));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p_lo, _mm256_set1_epi16(scale[2 * chunk])));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p_hi, _mm256_set1_epi16(scale[2 * chunk + 1])));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(x[b].d * half_to_float(w[b].d)), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc) - min_terms;
}

float vec_dot_q6_K_q8_K(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q6_K*>(row);
  const auto* x = static_cast<const block_q8_K*>(act);
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  const __m256i high_pair = _mm256_set1_epi8(0x30);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const int8_t* sc = w[b].scales;
    // Quants are stored as q + 32 (0..63); the -32 is applied through the activation sums.
    const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums));
    const int offset_sum = hsum(_mm256_madd_epi16(scales16, bsums));

    __m256i isum = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = w[b].ql + 64 * half;
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * half));
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, low_nibbles), _mm256_and_si256(_mm256_slli_epi16(qh, 4), high_pair)),
          _mm256_or_si256(_mm256_and_si256(ql1, low_nibbles), _mm256_and_si256(_mm256_slli_epi16(qh, 2), high_pair)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_nibbles), _mm256_and_si256(qh, high_pair)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_nibbles),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), high_pair)),
      };
      const int8_t* a = x[b].qs + 128 * half;
      for (int k = 0; k < 4; ++k) {
        const int group = 8 * half + 2 * k;  // 16-element group of the low 128-bit lane
        const __m256i group_scales = _mm256_set_m128i(_mm_set1_epi16(sc[group + 1]), _mm_set1_epi16(sc[group]));
        const __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 32 * k)));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, group_scales));
      }
    }
    sum += half_to_float(w[b].d) * x[b].d * static_cast<float>(hsum(isum) - 32 * offset_sum);
  }
  return sum;
}

}  // namespace ember::avx2
