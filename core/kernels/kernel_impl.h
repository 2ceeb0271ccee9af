#pragma once
// Internal to core/kernels: the per-architecture kernel functions the traits tables point at.
// generic:: is the scalar reference (always built); avx2:: exists when EMBER_HAVE_X86_SIMD is
// defined and may only be called after cpu_has_avx2_fma_f16c().
#include <cstddef>
#include <cstdint>

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
// Same tile with AVX-VNNI; only when cpu_has_avxvnni().
void gemm_tile_q4_0_q8_0_vnni(int64_t n, const void* rows, size_t row_stride, int n_rows, const void* acts,
                              size_t act_stride, int n_tokens, float* out, size_t out_stride);
bool cpu_has_avxvnni();
}  // namespace avx2

// The register-tile kernel of the active set for a weight type, or nullptr (then matmul falls
// back to one vec_dot per (row, token)).
GemmTileFn gemm_tile_kernel(uint32_t type_id);

}  // namespace ember
