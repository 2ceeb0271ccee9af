#include "core/sparse/q4_0_prepared_dot.h"

#include <cstring>

#include "core/kernels/cpu_features.h"
#include "core/kernels/fp16.h"
#include "core/kernels/quant_blocks.h"
#include "core/kernels/type_traits.h"

#if defined(EMBER_HAVE_X86_SIMD)
#include <immintrin.h>
#endif

namespace ember {
namespace {

#if defined(EMBER_HAVE_X86_SIMD)
// Compiled for the ISA through target attributes (this file is built for the baseline ISA);
// called only when the CPU has it.
#define EMBER_AVX2 "avx2,fma,f16c"
#define EMBER_VNNI "avx2,fma,f16c,avx512f,avx512vl,avx512vnni"

// One block through VNNI (the odd last block of the AVX-512 kernel): its 32 weights as bytes 0..15
// (low nibbles = elements 0..15 in the low lane, high nibbles = 16..31 in the high lane, the
// input's element order), one vpdpbusd for the four products per lane started at corr, then
// scaled by d_w * d_x.
__attribute__((target(EMBER_VNNI))) inline __m256 block_vnni(const block_q4_0& w, const int8_t* xq,
                                                             const int32_t* corr, float xd) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs));
  const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0F));
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
  const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_dpbusd_epi32(c, q, a)), _mm256_set1_ps(_cvtsh_ss(w.d) * xd));
}

// R rows against the same input at once (AVX2; the VNNI machines take dot_rows_vnni512 below): the
// input's loads are shared and the R weight streams are independent, so more memory reads are in
// flight (the sparse FFN's rows are at random addresses). One accumulator per row, one fma per
// block: with R >= 4 the R chains hide the fma latency, and every R sums a row in the same order,
// so grouping rows never changes a result. 8 rows keep 8 accumulators and the shared input in the
// 16 vector registers.
// The scale d_w * d_x of a block: d_w broadcast from the fp16 table, times d_x broadcast: the same
// product as the scalar kernel's, in 3 instructions instead of 6.
// While the rows stream, the rows of `ahead` (the next rows the caller will need, the same length)
// are requested into L2 at the same pace: every 3 blocks (54 bytes, less than a line) one prefetch
// per row at the same offset. The sparse FFN's rows start at random addresses, and a row that is
// not requested until its group starts waits for DRAM; requesting the next group's rows all at
// once instead (up to 18 KB) floods the miss queue and was slower (Zen 2, kernel bench: gate dots
// 13.6 -> 12.0 ms per token paced, 13.4 -> 18.7 all at once).
template <int R>
__attribute__((target(EMBER_AVX2))) inline void dot_rows_avx2(const block_q4_0* const* w, const Q4PreparedInput& x,
                                                               float* out, RowsAhead ahead = {}) {
  const int8_t* xq = x.qs.data();
  const float* xd = x.d.data();
  const int32_t* corr = x.corr.data();
  const int64_t nb = x.n_blocks;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i high_lane_shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
  __m256 acc[R];
  const float* f16 = fp16_to_fp32_table();
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * b));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr + 8 * b));
    const __m256 d = _mm256_broadcast_ss(xd + b);
    if (b % 3 == 0) {
      for (int r = 0; r < ahead.n; ++r) {
        _mm_prefetch(static_cast<const char*>(ahead.rows[r]) + b * static_cast<int64_t>(sizeof(block_q4_0)),
                     _MM_HINT_T1);
      }
    }
    for (int r = 0; r < R; ++r) {
      const block_q4_0& blk = w[r][b];
      // The block's 16 bytes in both lanes, the high lane shifted by 4: low nibbles (elements
      // 0..15) below, high nibbles (16..31) above. One instruction fewer than srli + insert.
      const __m256i packed =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs)));
      const __m256i q = _mm256_and_si256(_mm256_srlv_epi32(packed, high_lane_shift), low4);
      // maddubs: u8 x s8 -> pairs of int16 (2 * 15 * 128 cannot overflow), madd with ones -> int32.
      const __m256i sum = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), ones));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(_mm256_broadcast_ss(f16 + blk.d), d), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    out[r] = _mm_cvtss_f32(s);
  }
}

__attribute__((target(EMBER_AVX2))) float dot_avx2(const void* row, const Q4PreparedInput& x) {
  const block_q4_0* w[1] = {static_cast<const block_q4_0*>(row)};
  float out[1];
  dot_rows_avx2<1>(w, x, out);
  return out[0];
}

// The rows ahead are requested during the first call only: with at most 8 rows (the sparse FFN's
// groups) that is the whole of them.
__attribute__((target(EMBER_AVX2))) void dot_rows_avx2_any(const void* const* rows, int n, const Q4PreparedInput& x,
                                                           float* out, RowsAhead ahead) {
  const auto* w = reinterpret_cast<const block_q4_0* const*>(rows);
  int r = 0;
  for (; r + 8 <= n; r += 8, ahead = {}) dot_rows_avx2<8>(w + r, x, out + r, ahead);
  if (r + 4 <= n) { dot_rows_avx2<4>(w + r, x, out + r, ahead); r += 4; ahead = {}; }
  if (r + 2 <= n) { dot_rows_avx2<2>(w + r, x, out + r, ahead); r += 2; ahead = {}; }
  if (r < n) dot_rows_avx2<1>(w + r, x, out + r, ahead);
}

// AVX-512 VNNI, two blocks per step: half the instructions of dot_vnni per value. The 32 bytes of
// packed weights of blocks b and b+1 become one 64-byte register [b lo, b+1 lo, b hi, b+1 hi]
// (the order Q4PreparedInput::qs_pairs holds the input in), one vpdpbusd does all 64 products,
// and the two weight scales are spread over their lanes by two masked broadcasts.
#define EMBER_VNNI512 "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
// GCC 12 warns falsely about the undefined vectors inside its own AVX-512 intrinsics when they are
// used through a target attribute (as in axpy.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target(EMBER_VNNI512))) inline __m512 pair_vnni512(const block_q4_0& w0, const block_q4_0& w1,
                                                                  const int8_t* xq, const int32_t* corr,
                                                                  const float* xd) {
  const __m256i raw = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w0.qs))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(w1.qs)), 1);
  // raw in both halves, the upper one shifted right by 4 (the high nibbles), then masked.
  const __m512i both = _mm512_broadcast_i64x4(raw);
  const __m512i q = _mm512_and_si512(_mm512_mask_srli_epi16(both, 0xFFFF0000u, both, 4), _mm512_set1_epi8(0x0F));
  const __m512i sum = _mm512_dpbusd_epi32(_mm512_loadu_si512(corr), q, _mm512_loadu_si512(xq));
  // Lanes 0-3 and 8-11 belong to block b, 4-7 and 12-15 to block b+1.
  const __m256i dh = _mm256_mask_set1_epi16(_mm256_set1_epi16(static_cast<short>(w0.d)), 0xF0F0,
                                            static_cast<short>(w1.d));
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_cvtph_ps(dh)), _mm512_loadu_ps(xd));
}

// R rows against the same input at once: the input's loads are shared and the R weight streams are
// independent, so more memory reads are in flight (the sparse FFN's rows are at random addresses,
// and one stream at a time leaves the core waiting). Each row is summed exactly as dot_vnni512
// sums it (same accumulators, same order), so pairing rows never changes a result.
template <int R>
__attribute__((target(EMBER_VNNI512))) inline void dot_rows_vnni512(const block_q4_0* const* w,
                                                                    const Q4PreparedInput& x, float* out) {
  const int8_t* xq = x.qs_pairs.data();
  const int32_t* corr = x.corr_pairs.data();
  const float* xd = x.d_pairs.data();
  const int64_t n_pairs = x.n_blocks / 2;
  __m512 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 2 <= n_pairs; p += 2) {
    for (int r = 0; r < R; ++r) {
      acc0[r] = _mm512_add_ps(acc0[r], pair_vnni512(w[r][2 * p], w[r][2 * p + 1], xq + 64 * p, corr + 16 * p, xd + 16 * p));
      acc1[r] = _mm512_add_ps(acc1[r], pair_vnni512(w[r][2 * p + 2], w[r][2 * p + 3], xq + 64 * (p + 1),
                                                    corr + 16 * (p + 1), xd + 16 * (p + 1)));
    }
  }
  for (int r = 0; r < R; ++r) {
    if (p < n_pairs) {
      acc0[r] = _mm512_add_ps(acc0[r], pair_vnni512(w[r][2 * p], w[r][2 * p + 1], xq + 64 * p, corr + 16 * p, xd + 16 * p));
    }
    // Halves by hand rather than _mm512_reduce_add_ps, whose GCC 12 expansion warns of
    // uninitialized lanes.
    const __m512 v512 = _mm512_add_ps(acc0[r], acc1[r]);
    const __m256 v256 = _mm256_add_ps(_mm512_castps512_ps256(v512),
                                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v512), 1)));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v256), _mm256_extractf128_ps(v256, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    float sum = _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
    if (x.n_blocks % 2 != 0) {  // the odd last block, in element order
      const int64_t b = x.n_blocks - 1;
      const __m256 v = block_vnni(w[r][b], x.qs.data() + 32 * b, x.corr.data() + 8 * b, x.d[static_cast<size_t>(b)]);
      __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
      s = _mm_add_ps(s, _mm_movehl_ps(s, s));
      sum += _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
    }
    out[r] = sum;
  }
}

__attribute__((target(EMBER_VNNI512))) float dot_vnni512(const void* row, const Q4PreparedInput& x) {
  const block_q4_0* w[1] = {static_cast<const block_q4_0*>(row)};
  float out[1];
  dot_rows_vnni512<1>(w, x, out);
  return out[0];
}

// Any number of rows: groups of 8, then 4, 2, 1 (8 rows keep 16 accumulators and the shared input
// in the 32 vector registers).
// Does not request the rows ahead: not measured on an AVX-512 host yet (docs/limitations.md).
__attribute__((target(EMBER_VNNI512))) void dot_rows_vnni512_any(const void* const* rows, int n,
                                                                 const Q4PreparedInput& x, float* out, RowsAhead) {
  const auto* w = reinterpret_cast<const block_q4_0* const*>(rows);
  int r = 0;
  for (; r + 8 <= n; r += 8) dot_rows_vnni512<8>(w + r, x, out + r);
  if (r + 4 <= n) { dot_rows_vnni512<4>(w + r, x, out + r); r += 4; }
  if (r + 2 <= n) { dot_rows_vnni512<2>(w + r, x, out + r); r += 2; }
  if (r < n) dot_rows_vnni512<1>(w + r, x, out + r);
}
#pragma GCC diagnostic pop
#undef EMBER_VNNI512
#undef EMBER_AVX2
#undef EMBER_VNNI

using DotFn = float (*)(const void*, const Q4PreparedInput&);
using DotRowsFn = void (*)(const void* const*, int, const Q4PreparedInput&, float*, RowsAhead);

DotFn pick_dot() {
  // Follows the kernel set choice, so EMBER_KERNELS=scalar runs the scalar loop here too.
  const KernelSet set = active_kernel_set();
  if (set == KernelSet::Scalar) return dot_q4_0_prepared_scalar;
  if (set == KernelSet::Avx512Vnni && cpu_has_avx512_vnni()) return dot_vnni512;
  if (cpu_has_avx2_fma_f16c()) return dot_avx2;
  return dot_q4_0_prepared_scalar;
}

// Several rows through the one-row kernel, for the kernel sets without a multi-row one.
void dot_rows_by_one(const void* const* rows, int n, const Q4PreparedInput& x, float* out, RowsAhead) {
  for (int r = 0; r < n; ++r) out[r] = dot_q4_0_prepared(rows[r], x);
}

DotRowsFn pick_dot_rows() {
  const KernelSet set = active_kernel_set();
  if (set == KernelSet::Avx512Vnni && cpu_has_avx512_vnni()) return dot_rows_vnni512_any;
  if (set != KernelSet::Scalar && cpu_has_avx2_fma_f16c()) return dot_rows_avx2_any;
  return dot_rows_by_one;
}
#endif

}  // namespace

void Q4PreparedInput::reserve(int64_t n) {
  const auto blocks = static_cast<size_t>((n + kQK8_0 - 1) / kQK8_0);
  qs.assign(blocks * kQK8_0, 0);
  d.assign(blocks, 0.0f);
  corr.assign(blocks * 8, 0);
  qs_pairs.assign(blocks / 2 * 64, 0);
  corr_pairs.assign(blocks / 2 * 16, 0);
  d_pairs.assign(blocks / 2 * 16, 0.0f);
}

void Q4PreparedInput::prepare(const float* x, int64_t n) {
  n_blocks = n / kQK8_0;
  // The Q8_0 quantizer the dense path uses, one block at a time, so the integers are the same.
  const KernelTraits& q8 = *kernel_traits(GgmlType::Q8_0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    block_q8_0 blk;
    q8.from_float(x + kQK8_0 * b, &blk, kQK8_0);
    std::memcpy(&qs[static_cast<size_t>(kQK8_0 * b)], blk.qs, kQK8_0);
    d[static_cast<size_t>(b)] = fp16_to_fp32(blk.d);
    for (int g = 0; g < 8; ++g) {
      const int8_t* v = blk.qs + 4 * g;
      corr[static_cast<size_t>(8 * b + g)] = -8 * (v[0] + v[1] + v[2] + v[3]);
    }
  }
  // The pair layout (see the header): half h (elements 16h..16h+15) of block 2p+j goes to slot
  // 2h+j of pair p, 16 values and 4 groups per slot.
  for (int64_t p = 0; p < n_blocks / 2; ++p) {
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 2; ++j) {
        const auto b = static_cast<size_t>(2 * p + j);
        const auto slot = static_cast<size_t>(4 * p + 2 * h + j);
        std::memcpy(&qs_pairs[16 * slot], &qs[kQK8_0 * b + 16 * static_cast<size_t>(h)], 16);
        for (int g = 0; g < 4; ++g) {
          corr_pairs[4 * slot + static_cast<size_t>(g)] = corr[8 * b + 4 * static_cast<size_t>(h) + static_cast<size_t>(g)];
          d_pairs[4 * slot + static_cast<size_t>(g)] = d[b];
        }
      }
    }
  }
}

float dot_q4_0_prepared_scalar(const void* row, const Q4PreparedInput& x) {
  const auto* w = static_cast<const block_q4_0*>(row);
  float sum = 0.0f;
  for (int64_t b = 0; b < x.n_blocks; ++b) {
    int32_t s = 0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int lo = w[b].qs[j] & 0x0F, hi = w[b].qs[j] >> 4;
      s += (lo - 8) * x.qs[static_cast<size_t>(kQK8_0 * b + j)];
      s += (hi - 8) * x.qs[static_cast<size_t>(kQK8_0 * b + j + kQK4_0 / 2)];
    }
    sum += static_cast<float>(s) * (fp16_to_fp32(w[b].d) * x.d[static_cast<size_t>(b)]);
  }
  return sum;
}

float dot_q4_0_prepared(const void* row, const Q4PreparedInput& x) {
#if defined(EMBER_HAVE_X86_SIMD)
  static const DotFn fn = pick_dot();
  return fn(row, x);
#else
  return dot_q4_0_prepared_scalar(row, x);
#endif
}

void dot_q4_0_prepared_rows(const void* const* rows, int n, const Q4PreparedInput& x, float* out, RowsAhead ahead) {
#if defined(EMBER_HAVE_X86_SIMD)
  static const DotRowsFn fn = pick_dot_rows();
  fn(rows, n, x, out, ahead);
#else
  (void)ahead;
  for (int r = 0; r < n; ++r) out[r] = dot_q4_0_prepared_scalar(rows[r], x);
#endif
}

}  // namespace ember
