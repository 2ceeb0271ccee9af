// Scalar (de)quantizers. The quantizers follow ggml's reference ones (quantize_row_*_ref without
// importance weights) so that tensors Ember writes and activations it quantizes look like
// llama.cpp's: same rounding, same scale choice, same search for the K-quant scales.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/kernels/fp16.h"
#include "core/kernels/kernel_impl.h"
#include "core/kernels/quant_blocks.h"

namespace ember::generic {
namespace {

// Round to nearest, ties to even, for |x| < 2^22: the float-add trick ggml's nearest_int uses,
// so ties break exactly as in llama.cpp.
int nearest_int(float x) {
  const float shifted = x + 12582912.0f;  // 1.5 * 2^23
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007FFFFF) - 0x00400000;
}

// Fits x[i] ~ scale * L[i] - min with L in [0, nmax], weighting errors by `weights`: a first guess
// from the range, then nstep+1 trial scales around it, each refined by least squares.
float fit_scale_min(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                    uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *the_min = -min;
    return 0.0f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
    L[i] = static_cast<uint8_t>(l);
    const float diff = scale * L[i] + min - x[i];
    best_error += weights[i] * diff * diff;
  }
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * step + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      sum_l += weights[i] * l;
      sum_l2 += weights[i] * l * l;
      sum_xl += weights[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * Laux[i] + this_min - x[i];
      error += weights[i] * diff * diff;
    }
    if (error < best_error) {
      std::copy(Laux, Laux + n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *the_min = -min;
  return scale;
}

// Symmetric fit x[i] ~ scale * (L[i] - nmax), L in [0, 2*nmax), weights x^2: ggml's make_qx_quants
// with rmse_type 1 and no importance weights (what the Q6_K reference quantizer uses).
float fit_symmetric_scale(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < 1e-15f) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(nmax + 0.1f * step) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<int8_t>(nmax + std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

}  // namespace

void to_float_f32(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }
void from_float_f32(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }

void to_float_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
}
void from_float_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
}

void to_float_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
}
void from_float_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
}

void to_float_q4_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const block_q4_0*>(src);
  for (int64_t b = 0; b < n / kQK4_0; ++b, dst += kQK4_0) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      dst[j] = ((blocks[b].qs[j] & 0x0F) - 8) * d;
      dst[j + 16] = ((blocks[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void from_float_q4_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<block_q4_0*>(dst);
  for (int64_t b = 0; b < n / kQK4_0; ++b, src += kQK4_0) {
    // The signed value of largest magnitude maps to -8, so the full 16 levels are used.
    float amax = 0, max = 0;
    for (int j = 0; j < kQK4_0; ++j) {
      if (amax < std::fabs(src[j])) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(src[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(src[j + 16] * id + 8.5f)));
      blocks[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void to_float_q8_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const block_q8_0*>(src);
  for (int64_t b = 0; b < n / kQK8_0; ++b, dst += kQK8_0) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < kQK8_0; ++j) dst[j] = blocks[b].qs[j] * d;
  }
}

void from_float_q8_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<block_q8_0*>(dst);
  for (int64_t b = 0; b < n / kQK8_0; ++b, src += kQK8_0) {
    float amax = 0;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j) blocks[b].qs[j] = static_cast<int8_t>(std::round(src[j] * id));
  }
}

void to_float_q4_K(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const block_q4_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = fp16_to_fp32(blocks[b].d);
    const float dmin = fp16_to_fp32(blocks[b].dmin);
    const uint8_t* q = blocks[b].qs;
    for (int chunk = 0; chunk < 4; ++chunk, q += 32) {
      uint8_t sc, m;
      q4_K_scale_min(2 * chunk, blocks[b].scales, sc, m);
      const float d1 = d * sc, m1 = dmin * m;
      q4_K_scale_min(2 * chunk + 1, blocks[b].scales, sc, m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *dst++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void from_float_q4_K(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<block_q4_K*>(dst);
  uint8_t L[kQK_K], Laux[32];
  float weights[32], mins[8], scales[8];
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    block_q4_K& y = blocks[b];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      const float* x = src + 32 * j;
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[l] * x[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[l]);
      scales[j] = fit_scale_min(32, 15, x, weights, L + 32 * j, &mins[j], Laux, -1.0f, 0.1f, 20);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    std::memset(y.scales, 0, sizeof y.scales);
    for (int j = 0; j < 8; ++j) {
      const uint8_t ls = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j])));
      const uint8_t lm = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
      if (j < 4) {
        y.scales[j] = ls;
        y.scales[j + 4] = lm;
      } else {  // low 4 bits in bytes 8..11, high 2 bits in the top of bytes 0..7
        y.scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        y.scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        y.scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
      }
    }
    y.d = fp32_to_fp16(max_scale / 63.0f);
    y.dmin = fp32_to_fp16(max_min / 63.0f);
    // Requantize against the scales as stored, so rounding of the 6-bit scales is compensated.
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      q4_K_scale_min(j, y.scales, sc, m);
      const float d = fp16_to_fp32(y.d) * sc;
      if (!d) continue;
      const float dm = fp16_to_fp32(y.dmin) * m;
      for (int l = 0; l < 32; ++l) {
        L[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((src[32 * j + l] + dm) / d), 0, 15));
      }
    }
    for (int chunk = 0; chunk < 4; ++chunk) {
      for (int l = 0; l < 32; ++l) {
        y.qs[32 * chunk + l] = static_cast<uint8_t>(L[64 * chunk + l] | (L[64 * chunk + 32 + l] << 4));
      }
    }
  }
}

void to_float_q6_K(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const block_q6_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = fp16_to_fp32(blocks[b].d);
    const uint8_t* ql = blocks[b].ql;
    const uint8_t* qh = blocks[b].qh;
    const int8_t* sc = blocks[b].scales;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, dst += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        dst[l] = d * sc[is] * q1;
        dst[l + 32] = d * sc[is + 2] * q2;
        dst[l + 64] = d * sc[is + 4] * q3;
        dst[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

void from_float_q6_K(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<block_q6_K*>(dst);
  int8_t L[kQK_K];
  float scales[16];
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    block_q6_K& y = blocks[b];
    float max_scale = 0, max_abs_scale = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_symmetric_scale(16, 32, src + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    if (max_abs_scale < 1e-15f) {
      std::memset(&y, 0, sizeof y);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    y.d = fp32_to_fp16(1 / iscale);
    for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(y.d) * y.scales[j];
      if (!d) continue;
      for (int l = 0; l < 16; ++l) {
        L[16 * j + l] = static_cast<int8_t>(std::clamp(nearest_int(src[16 * j + l] / d), -32, 31) + 32);
      }
    }
    for (int half = 0; half < 2; ++half) {
      const int8_t* Lh = L + 128 * half;
      uint8_t* ql = y.ql + 64 * half;
      uint8_t* qh = y.qh + 32 * half;
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = Lh[l] & 0xF, q2 = Lh[l + 32] & 0xF, q3 = Lh[l + 64] & 0xF, q4 = Lh[l + 96] & 0xF;
        ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                     ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

void to_float_q8_K(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const block_q8_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    for (int j = 0; j < kQK_K; ++j) dst[j] = blocks[b].d * blocks[b].qs[j];
  }
}

void from_float_q8_K(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<block_q8_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    block_q8_K& y = blocks[b];
    float max = 0, amax = 0;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(src[j]) > amax) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    if (!amax) {
      std::memset(&y, 0, sizeof y);
      continue;
    }
    // ggml scales by -127/max (not 128) so that every quant fits in [-127, 127].
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) y.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * src[j])));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y.qs[16 * g + l];
      y.bsums[g] = static_cast<int16_t>(sum);
    }
    y.d = 1 / iscale;
  }
}

}  // namespace ember::generic
