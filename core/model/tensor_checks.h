#pragma once
// The checks every tensor binding makes (model_weights*.cpp): present, of the expected shape, of a
// type the kernels compute with; each error names the tensor.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/gguf/gguf_file.h"
#include "core/kernels/matmul.h"
#include "core/kernels/type_traits.h"

namespace ember::weights_detail {

inline std::string shape_string(const gguf::TensorInfo& t) {
  std::string s = "{";
  for (uint32_t i = 0; i < t.n_dims; ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
  return s + "}";
}

inline const gguf::TensorInfo& require(const gguf::GgufFile& file, const std::string& name) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (!t) throw std::runtime_error("model tensor '" + name + "' is missing");
  return *t;
}

inline void check_shape(const gguf::TensorInfo& t, int64_t ne0, int64_t ne1, int64_t ne2 = 1) {
  const bool ok = t.ne[0] == static_cast<uint64_t>(ne0) && t.ne[1] == static_cast<uint64_t>(ne1) &&
                  t.ne[2] == static_cast<uint64_t>(ne2) && t.ne[3] == 1;
  if (!ok) {
    // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) about "{" + std::to_string(...).
    std::string expected = "{";
    expected += std::to_string(ne0);
    if (ne1 != 1 || ne2 != 1) expected += ", " + std::to_string(ne1);
    if (ne2 != 1) expected += ", " + std::to_string(ne2);
    expected += "}";
    throw std::runtime_error("model tensor '" + t.name + "': shape " + shape_string(t) + ", expected " + expected);
  }
}

// A matrix the kernels can compute with.
inline void require_kernel_type(const gguf::TensorInfo& t) {
  if (!kernel_traits(t.type)) {
    throw std::runtime_error("model tensor '" + t.name + "': type " + std::string(type_name(t.type)) +
                             " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)");
  }
}

// A matrix the file holds only neuron-major (a pack's or a sparse file's down projection): its
// shape for the kernels' checks, no data, so that matmul on it fails its stride check instead of
// reading through nullptr.
inline MatrixView shape_only(GgmlType type, int64_t cols, int64_t rows) {
  MatrixView m;
  m.type = type;
  m.cols = cols;
  m.rows = rows;
  return m;
}

}  // namespace ember::weights_detail
