#pragma once
// The ggml tensor type ids as they appear in GGUF files, and the storage geometry of each
// (elements per block, bytes per block). The GGUF reader needs the geometry of every type a file
// may name, even the ones Ember cannot compute with, so that it can validate sizes and offsets;
// which types the kernels support is a separate question (core/kernels/type_traits.h).
#include <cstdint>
#include <optional>
#include <string_view>

namespace ember {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  // 4 and 5 were Q4_2 / Q4_3, removed from ggml long ago.
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  // 31..33 and 36..38 were the online-repacked Q4_0_x_y / IQ4_NL_x_y types, removed from files.
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct TypeGeometry {
  std::string_view name;
  uint32_t block_size;  // elements per block
  uint32_t type_size;   // bytes per block
};

// Geometry of a type id read from a file; nullopt for ids ggml never defined (or removed).
std::optional<TypeGeometry> type_geometry(uint32_t type_id);

// Name for logs and errors ("Q4_0"); "type#N" for an unknown id.
std::string_view type_name(GgmlType type);

// Bytes of one row of n_elements of this type. Throws std::invalid_argument when n_elements is not a
// multiple of the block size or the type is unknown, std::overflow_error when it does not fit.
uint64_t row_bytes(GgmlType type, uint64_t n_elements);

// Parse "Q4_0", "f16", ... (case-insensitive) for command-line flags.
std::optional<GgmlType> parse_type_name(std::string_view name);

}  // namespace ember
