// Scalar reference dot products: one weight row against one activation row already converted to
// the weight type's vec_dot_type. Integer parts are summed exactly in int32, as the SIMD kernels do.
#include "core/kernels/fp16.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"

namespace ember::generic {

float vec_dot_f32(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const float*>(row);
  const auto* x = static_cast<const float*>(act);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i]) * x[i];
  return static_cast<float>(sum);
}

float vec_dot_f16(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const uint16_t*>(row);
  const auto* x = static_cast<const uint16_t*>(act);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(w[i])) * fp16_to_fp32(x[i]);
  return static_cast<float>(sum);
}

float vec_dot_bf16(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const uint16_t*>(row);
  const auto* x = static_cast<const uint16_t*>(act);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(w[i])) * bf16_to_fp32(x[i]);
  return static_cast<float>(sum);
}

float vec_dot_q4_0_q8_0(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q4_0*>(row);
  const auto* x = static_cast<const block_q8_0*>(act);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += ((w[b].qs[j] & 0x0F) - 8) * x[b].qs[j];
      isum += ((w[b].qs[j] >> 4) - 8) * x[b].qs[j + 16];
    }
    sum += isum * (fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d));
  }
  return sum;
}

float vec_dot_q8_0_q8_0(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q8_0*>(row);
  const auto* x = static_cast<const block_q8_0*>(act);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int isum = 0;
    for (int j = 0; j < kQK8_0; ++j) isum += w[b].qs[j] * x[b].qs[j];
    sum += isum * (fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d));
  }
  return sum;
}

float vec_dot_q4_K_q8_K(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q4_K*>(row);
  const auto* x = static_cast<const block_q8_K*>(act);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int scaled = 0;  // sum_j scale_j * dot(q_j, a_j)
    int mins = 0;    // sum_j min_j * sum(a_j)
    const uint8_t* q = w[b].qs;
    const int8_t* a = x[b].qs;
    for (int chunk = 0; chunk < 4; ++chunk, q += 32, a += 64) {
      uint8_t sc_lo, m_lo, sc_hi, m_hi;
      q4_K_scale_min(2 * chunk, w[b].scales, sc_lo, m_lo);
      q4_K_scale_min(2 * chunk + 1, w[b].scales, sc_hi, m_hi);
      int dot_lo = 0, dot_hi = 0;
      for (int l = 0; l < 32; ++l) {
        dot_lo += (q[l] & 0xF) * a[l];
        dot_hi += (q[l] >> 4) * a[l + 32];
      }
      scaled += sc_lo * dot_lo + sc_hi * dot_hi;
      const int16_t* bs = x[b].bsums + 4 * chunk;
      mins += m_lo * (bs[0] + bs[1]) + m_hi * (bs[2] + bs[3]);
    }
    sum += x[b].d * fp16_to_fp32(w[b].d) * scaled - x[b].d * fp16_to_fp32(w[b].dmin) * mins;
  }
  return sum;
}

float vec_dot_q6_K_q8_K(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q6_K*>(row);
  const auto* x = static_cast<const block_q8_K*>(act);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int8_t q[kQK_K];
    const uint8_t* ql = w[b].ql;
    const uint8_t* qh = w[b].qh;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32) {
      int8_t* qq = q + 128 * half;
      for (int l = 0; l < 32; ++l) {
        qq[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        qq[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        qq[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        qq[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
    }
    int isum = 0;
    for (int g = 0; g < 16; ++g) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) dot += q[16 * g + l] * x[b].qs[16 * g + l];
      isum += w[b].scales[g] * dot;
    }
    sum += fp16_to_fp32(w[b].d) * x[b].d * isum;
  }
  return sum;
}

float vec_dot_q8_K_q8_K(int64_t n, const void* row, const void* act) {
  const auto* w = static_cast<const block_q8_K*>(row);
  const auto* x = static_cast<const block_q8_K*>(act);
  float sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int isum = 0;
    for (int j = 0; j < kQK_K; ++j) isum += w[b].qs[j] * x[b].qs[j];
    sum += w[b].d * x[b].d * isum;
  }
  return sum;
}

}  // namespace ember::generic
