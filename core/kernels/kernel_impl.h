#pragma once
// Internal to core/kernels: the per-architecture kernel functions the traits tables point at.
// generic:: is the scalar reference (always built); avx2:: exists when EMBER_HAVE_X86_SIMD is
// defined and may only be called after cpu_has_avx2_fma_f16c(); neon:: when EMBER_HAVE_ARM_NEON is.
#include <cstddef>
#include <cstdint>

#include "core/kernels/sparse_kernels.h"

namespace ember {

// Computes out[r * out_stride + t] = dot(row r, act t) for r < n_rows, t < n_tokens: a register
// tile of weight rows against converted activation rows. Rows are row_stride bytes apart,
// activations act_stride bytes apart. n_rows and n_tokens are at most 4.
using GemmTileFn = void (*)(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                            size_t act_stride, int n_tokens, float* out, size_t out_stride);

namespace generic {
void to_float_f32(const void* src, float* dst, int64_t n);
void from_float_f32(const float* src, void* dst, int64_t n);
void to_float_f16(const void* src, float* dst, int64_t n);
void from_float_f16(const float* src, void* dst, int64_t n);
void to_float_bf16(const void* src, float* dst, int64_t n);
void from_float_bf16(const float* src, void* dst, int64_t n);
void to_float_q4_0(const void* src, float* dst, int64_t n);
void from_float_q4_0(const float* src, void* dst, int64_t n);
void to_float_q8_0(const void* src, float* dst, int64_t n);
void from_float_q8_0(const float* src, void* dst, int64_t n);
void to_float_q4_K(const void* src, float* dst, int64_t n);
void from_float_q4_K(const float* src, void* dst, int64_t n);
void to_float_q6_K(const void* src, float* dst, int64_t n);
void from_float_q6_K(const float* src, void* dst, int64_t n);
void to_float_q8_K(const void* src, float* dst, int64_t n);
void from_float_q8_K(const float* src, void* dst, int64_t n);

float vec_dot_f32(int64_t n, const void* row, const void* act);
float vec_dot_f16(int64_t n, const void* row, const void* act);
float vec_dot_bf16(int64_t n, const void* row, const void* act);
float vec_dot_q4_0_q8_0(int64_t n, const void* row, const void* act);
float vec_dot_q8_0_q8_0(int64_t n, const void* row, const void* act);
float vec_dot_q4_K_q8_K(int64_t n, const void* row, const void* act);
float vec_dot_q6_K_q8_K(int64_t n, const void* row, const void* act);
float vec_dot_q8_K_q8_K(int64_t n, const void* row, const void* act);

// The sparse FFN's kernels (sparse_kernels.h has the contracts): the reference arithmetic.
AxpyF32Fn axpy_f32;
AxpyF16Fn axpy_f16;
AxpyBlocksFn axpy_q4_0, axpy_q8_0;
AxpyRowsFn axpy_q4_0_rows;
PreparedDotFn dot_q4_0_prepared;
PreparedDotRowsFn dot_q4_0_prepared_rows;
}  // namespace generic

namespace avx2 {
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);
void to_float_f16(const void* src, float* dst, int64_t n);
void from_float_f16(const float* src, void* dst, int64_t n);
void to_float_q4_0(const void* src, float* dst, int64_t n);
void from_float_q8_0(const float* src, void* dst, int64_t n);

float vec_dot_f32(int64_t n, const void* row, const void* act);
float vec_dot_f16(int64_t n, const void* row, const void* act);
float vec_dot_bf16(int64_t n, const void* row, const void* act);
float vec_dot_q4_0_q8_0(int64_t n, const void* row, const void* act);
float vec_dot_q8_0_q8_0(int64_t n, const void* row, const void* act);
float vec_dot_q4_K_q8_K(int64_t n, const void* row, const void* act);
float vec_dot_q6_K_q8_K(int64_t n, const void* row, const void* act);

void gemm_tile_q4_0_q8_0(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                         size_t act_stride, int n_tokens, float* out, size_t out_stride);
void gemm_tile_q8_0_q8_0(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                         size_t act_stride, int n_tokens, float* out, size_t out_stride);
// AVX-VNNI variants; only when cpu_has_avx_vnni() (cpu_features.h).
void gemm_tile_q4_0_q8_0_vnni(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                              size_t act_stride, int n_tokens, float* out, size_t out_stride);
void gemm_tile_q8_0_q8_0_vnni(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                              size_t act_stride, int n_tokens, float* out, size_t out_stride);
// Decode rows: out[i] = dot(row i, act) for i < n_rows.
void gemv_q4_0_q8_0_vnni(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out);
void gemv_q8_0_q8_0_vnni(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out);

// Q4_0 prefill on repacked 8-row panels (x86/prefill_panel_avxvnni.cpp has the layout).
// repack: nb blocks of 8 rows (row_stride apart) into panel (nb * 144 bytes).
void repack_q4_0_panel8(int64_t nb, const void* rows, size_t row_stride, void* panel);
// out[b] = -bias * (sum of the quants of Q8_0 block b): the start value that undoes a weight offset.
void q8_0_bias_sums(int64_t nb, const void* act, int32_t bias, int32_t* out);
// y[t * y_stride + r] = dot(panel row r, token t) for r < 8, t < n_tokens (1..4); the _vnni one
// needs AVX-VNNI.
void panel_gemm_q4_0_vnni(int64_t nb, const void* panel, const void* acts, size_t act_stride, const int32_t* bias_sums,
                          size_t sums_stride, int n_tokens, float* y, size_t y_stride);
void panel_gemm_q4_0_avx2(int64_t nb, const void* panel, const void* acts, size_t act_stride, const int32_t* bias_sums,
                          size_t sums_stride, int n_tokens, float* y, size_t y_stride);

// The sparse FFN's kernels (sparse_kernels.h); multi-row ones take up to 8 rows side by side.
AxpyF32Fn axpy_f32;
AxpyF16Fn axpy_f16;
AxpyBlocksFn axpy_q4_0, axpy_q8_0;
AxpyRowsFn axpy_q4_0_rows;
PreparedDotFn dot_q4_0_prepared;
PreparedDotRowsFn dot_q4_0_prepared_rows;
}  // namespace avx2

// AVX-512 kernels (x86_avx512/, built when EMBER_HAVE_X86_AVX512 is defined); only when
// cpu_has_avx512_vnni() (cpu_features.h).
namespace avx512 {
// Q4_0 on repacked 16-row panels (x86_avx512/panel16_avx512vnni.cpp has the layout).
// repack: nb blocks of 16 rows (row_stride apart) into panel (nb * 288 bytes).
void repack_q4_0_panel16(int64_t nb, const void* rows, size_t row_stride, void* panel);
// y[t * y_stride + r] = dot(panel row r, token t) for r < 16, t < n_tokens (1..8).
void panel16_gemm_q4_0(int64_t nb, const void* panel, const void* acts, size_t act_stride, const int32_t* bias_sums,
                       size_t sums_stride, int n_tokens, float* y, size_t y_stride);

// The sparse FFN's Q4_0/Q8_0 kernels (sparse_kernels.h); the F32/F16 axpy of this set is avx2's.
AxpyBlocksFn axpy_q4_0, axpy_q8_0;
AxpyRowsFn axpy_q4_0_rows;
PreparedDotFn dot_q4_0_prepared;
PreparedDotRowsFn dot_q4_0_prepared_rows;
}  // namespace avx512

// NEON kernels (arm/, built when EMBER_HAVE_ARM_NEON is defined); only when cpu_has_neon(), the
// *_dotprod ones (arm/*_dotprod.cpp, built for ARMv8.2 + dot product) only when cpu_has_dotprod(),
// the *_i8mm ones (arm/*_i8mm.cpp, ARMv8.2 + int8 matrix multiply) only when cpu_has_i8mm().
namespace neon {
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);
void to_float_f16(const void* src, float* dst, int64_t n);
void from_float_f16(const float* src, void* dst, int64_t n);
void to_float_q4_0(const void* src, float* dst, int64_t n);
void from_float_q8_0(const float* src, void* dst, int64_t n);

float vec_dot_f32(int64_t n, const void* row, const void* act);
float vec_dot_f16(int64_t n, const void* row, const void* act);
float vec_dot_bf16(int64_t n, const void* row, const void* act);
float vec_dot_q4_0_q8_0(int64_t n, const void* row, const void* act);
float vec_dot_q8_0_q8_0(int64_t n, const void* row, const void* act);
float vec_dot_q4_K_q8_K(int64_t n, const void* row, const void* act);
float vec_dot_q6_K_q8_K(int64_t n, const void* row, const void* act);
float vec_dot_q4_0_q8_0_dotprod(int64_t n, const void* row, const void* act);
float vec_dot_q8_0_q8_0_dotprod(int64_t n, const void* row, const void* act);
float vec_dot_q4_K_q8_K_dotprod(int64_t n, const void* row, const void* act);
float vec_dot_q6_K_q8_K_dotprod(int64_t n, const void* row, const void* act);

// Prefill register tiles (arm/gemm_tiles.h): any shape up to 4 rows x 4 tokens.
void gemm_tile_q4_0_q8_0(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                         size_t act_stride, int n_tokens, float* out, size_t out_stride);
void gemm_tile_q8_0_q8_0(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                         size_t act_stride, int n_tokens, float* out, size_t out_stride);
void gemm_tile_q4_0_q8_0_dotprod(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                                 size_t act_stride, int n_tokens, float* out, size_t out_stride);
void gemm_tile_q8_0_q8_0_dotprod(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                                 size_t act_stride, int n_tokens, float* out, size_t out_stride);
// Decode rows (arm/gemv_rows.h): out[i] = dot(row i, act) for i < n_rows, each bit for bit the
// set's vec_dot.
void gemv_q4_0_q8_0(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out);
void gemv_q8_0_q8_0(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out);
void gemv_q4_0_q8_0_dotprod(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out);
void gemv_q8_0_q8_0_dotprod(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out);

// Q4_0 on repacked 4-row panels (arm/q4_0_panel.h has the layout). repack: nb blocks of 4 rows
// (row_stride apart) into panel (nb * 72 bytes). The kernels: y[t * y_stride + r] = dot(panel row
// r, token t) for r < 4, t < n_tokens (1..4); they take no bias sums (PanelGemmFn's are ignored).
// _i8mm only when cpu_has_i8mm(), _dotprod only when cpu_has_dotprod().
void repack_q4_0_panel4(int64_t nb, const void* rows, size_t row_stride, void* panel);
void panel_gemm_q4_0_i8mm(int64_t nb, const void* panel, const void* acts, size_t act_stride, const int32_t* bias_sums,
                          size_t sums_stride, int n_tokens, float* y, size_t y_stride);
void panel_gemm_q4_0_dotprod(int64_t nb, const void* panel, const void* acts, size_t act_stride,
                             const int32_t* bias_sums, size_t sums_stride, int n_tokens, float* y, size_t y_stride);

// The sparse FFN's kernels (sparse_kernels.h); multi-row ones take up to 8 rows side by side.
AxpyF32Fn axpy_f32;
AxpyF16Fn axpy_f16;
AxpyBlocksFn axpy_q4_0, axpy_q8_0;
AxpyRowsFn axpy_q4_0_rows;
PreparedDotFn dot_q4_0_prepared, dot_q4_0_prepared_dotprod;
PreparedDotRowsFn dot_q4_0_prepared_rows, dot_q4_0_prepared_rows_dotprod;
}  // namespace neon

// Several weight rows against one converted activation row: out[i] = dot(row i, act).
using GemvRowsFn = void (*)(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* act, float* out);

// The multi-row decode kernel of the active set for a weight type, or nullptr (then matmul calls
// vec_dot per row).
GemvRowsFn gemv_rows_kernel(uint32_t type_id);

using PanelGemmFn = void (*)(int64_t nb, const void* panel, const void* acts, size_t act_stride,
                            const int32_t* bias_sums, size_t sums_stride, int n_tokens, float* y, size_t y_stride);
// The Q4_0 panel kernel of the active set, or nullptr when matmul should not use panels.
PanelGemmFn q4_0_panel_kernel();

// Copies nb blocks of `rows` panel rows (row_stride bytes apart) into one panel.
using PanelRepackFn = void (*)(int64_t nb, const void* rows, size_t row_stride, void* panel);

// out[b] = -bias * (sum of the quants of Q8_0 block b), b < nb.
using BiasSumsFn = void (*)(int64_t nb, const void* act, int32_t bias, int32_t* out);

// Everything matmul needs to know about the active set's Q4_0 panels: how many rows one panel
// interleaves (8 for AVX2/AVX-VNNI, 16 for AVX-512, 4 on ARM), its repacker and its kernel
// (n_tokens 1..max_tokens: 32 ZMM registers hold 8 quant vectors and 8 tokens' sums), and the
// per-block activation sums its kernel starts from (the -8 offset of the nibbles; nullptr for
// kernels that sign the nibbles themselves, the ARM ones, which then get bias_sums == nullptr).
struct Q4_0Panels {
  int rows = 0;
  int max_tokens = 0;
  PanelRepackFn repack = nullptr;
  PanelGemmFn gemm = nullptr;
  BiasSumsFn bias_sums = nullptr;
  uint64_t block_bytes() const { return static_cast<uint64_t>(rows) * 18; }
};
// The active set's panels, or nullptr when matmul should not use panels.
const Q4_0Panels* q4_0_panels();

// The register-tile kernel of the active set for a weight type, or nullptr (then matmul falls
// back to one vec_dot per (row, token)).
GemmTileFn gemm_tile_kernel(uint32_t type_id);

}  // namespace ember
