#include "core/tensor/ggml_type.h"

#include <array>
#include <cctype>
#include <limits>
#include <stdexcept>
#include <string>

namespace ember {
namespace {

struct Entry {
  uint32_t id;
  TypeGeometry geometry;
};

// Sizes follow the block structs of ggml-common.h (QK_K = 256).
constexpr std::array<Entry, 32> kTypes{{
    {0, {"F32", 1, 4}},        {1, {"F16", 1, 2}},        {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},     {6, {"Q5_0", 32, 22}},     {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},     {9, {"Q8_1", 32, 36}},     {10, {"Q2_K", 256, 84}},
    {11, {"Q3_K", 256, 110}},  {12, {"Q4_K", 256, 144}},  {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}},  {15, {"Q8_K", 256, 292}},  {16, {"IQ2_XXS", 256, 66}},
    {17, {"IQ2_XS", 256, 74}}, {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},
    {20, {"IQ4_NL", 32, 18}},  {21, {"IQ3_S", 256, 110}}, {22, {"IQ2_S", 256, 82}},
    {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},       {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},       {27, {"I64", 1, 8}},       {28, {"F64", 1, 8}},
    {29, {"IQ1_M", 256, 56}},  {30, {"BF16", 1, 2}},      {34, {"TQ1_0", 256, 54}},
    {35, {"TQ2_0", 256, 66}},  {39, {"MXFP4", 32, 17}},
}};

}  // namespace

std::optional<TypeGeometry> type_geometry(uint32_t type_id) {
  for (const Entry& e : kTypes) {
    if (e.id == type_id) return e.geometry;
  }
  return std::nullopt;
}

std::string_view type_name(GgmlType type) {
  if (auto g = type_geometry(static_cast<uint32_t>(type))) return g->name;
  return "type#unknown";
}

uint64_t row_bytes(GgmlType type, uint64_t n_elements) {
  auto g = type_geometry(static_cast<uint32_t>(type));
  if (!g) throw std::invalid_argument("unknown tensor type id " + std::to_string(static_cast<uint32_t>(type)));
  if (n_elements % g->block_size != 0) {
    throw std::invalid_argument("row of " + std::to_string(n_elements) + " elements is not a multiple of " +
                                std::string(g->name) + "'s block size " + std::to_string(g->block_size));
  }
  const uint64_t blocks = n_elements / g->block_size;
  if (blocks > std::numeric_limits<uint64_t>::max() / g->type_size) {
    throw std::overflow_error("row byte size overflows 64 bits");
  }
  return blocks * g->type_size;
}

std::optional<GgmlType> parse_type_name(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const Entry& e : kTypes) {
    if (e.geometry.name == upper) return static_cast<GgmlType>(e.id);
  }
  return std::nullopt;
}

}  // namespace ember
