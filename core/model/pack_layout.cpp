#include "core/model/pack_layout.h"

#include <stdexcept>
#include <vector>

#include "core/kernels/type_traits.h"

namespace ember::pack {
namespace {

std::string layer_tensor(int64_t layer, const char* suffix) { return "blk." + std::to_string(layer) + "." + suffix; }

uint64_t part_row_bytes(GgmlType type, int64_t n_embd, const char* part) {
  if (kernel_traits(type) == nullptr) {
    throw std::invalid_argument(std::string("pack: ") + part + " type " + std::string(type_name(type)) +
                                " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)");
  }
  try {
    return row_bytes(type, static_cast<uint64_t>(n_embd));
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("pack: ") + part + " rows of " + std::to_string(n_embd) + " " +
                                std::string(type_name(type)) + " values: " + e.what());
  }
}

uint64_t require_uint(const gguf::Metadata& md, const char* key) {
  const std::optional<uint64_t> v = md.get_uint(key);  // throws naming the key on a wrong type
  if (!v) throw std::runtime_error(std::string("pack metadata key '") + key + "' is missing");
  return *v;
}

GgmlType require_type(const gguf::Metadata& md, const char* key) {
  const uint64_t id = require_uint(md, key);
  if (id > 0xffffffffu || !type_geometry(static_cast<uint32_t>(id))) {
    throw std::runtime_error(std::string("pack metadata key '") + key + "': " + std::to_string(id) +
                             " is not a ggml type id");
  }
  return static_cast<GgmlType>(id);
}

MatrixView part_view(GgmlType type, const void* bundles, uint64_t offset, uint64_t stride, int64_t n_ff,
                     int64_t n_embd) {
  MatrixView m;
  m.type = type;
  m.cols = n_embd;
  m.rows = n_ff;
  m.data = static_cast<const uint8_t*>(bundles) + offset;
  m.row_stride = stride;
  return m;
}

}  // namespace

std::string bundles_name(int64_t layer) { return layer_tensor(layer, "ffn_bundles"); }
std::string perm_name(int64_t layer) { return layer_tensor(layer, "neuron_perm"); }
std::string freq_name(int64_t layer) { return layer_tensor(layer, "neuron_freq"); }

BundleLayout compute_bundle_layout(GgmlType gate, GgmlType up, GgmlType down, int64_t n_embd) {
  BundleLayout b;
  b.gate_type = gate;
  b.up_type = up;
  b.down_type = down;
  b.gate_bytes = part_row_bytes(gate, n_embd, "gate");
  b.up_bytes = part_row_bytes(up, n_embd, "up");
  b.down_bytes = part_row_bytes(down, n_embd, "down");
  // Rows of n_embd <= 2^16 values of at most 4 bytes each: no overflow possible for any model that
  // passed the config limits, but the sum is still checked for callers with other inputs.
  if (__builtin_add_overflow(b.gate_bytes, b.up_bytes, &b.down_offset) ||
      __builtin_add_overflow(b.down_offset, b.down_bytes, &b.bundle_bytes)) {
    throw std::invalid_argument("pack: bundle size overflows");
  }
  b.up_offset = b.gate_bytes;
  return b;
}

bool is_pack(const gguf::Metadata& md) { return md.contains(kVersionKey); }

PackInfo read_pack_info(const gguf::Metadata& md, int64_t n_embd) {
  PackInfo info;
  const uint64_t version = require_uint(md, kVersionKey);
  if (version != kVersion) {
    throw std::runtime_error(std::string("pack metadata key '") + kVersionKey + "': version " +
                             std::to_string(version) + " is not supported (this Ember reads version " +
                             std::to_string(kVersion) + ")");
  }
  info.version = static_cast<uint32_t>(version);
  const GgmlType gate = require_type(md, kGateTypeKey);
  const GgmlType up = require_type(md, kUpTypeKey);
  const GgmlType down = require_type(md, kDownTypeKey);
  try {
    info.layout = compute_bundle_layout(gate, up, down, n_embd);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string(e.what()) + " (from " + kGateTypeKey + "/" + kUpTypeKey + "/" + kDownTypeKey +
                             ")");
  }
  const BundleLayout& b = info.layout;
  struct Expected {
    const char* key;
    uint64_t value;
    const char* why;
  };
  const Expected expected[] = {
      {kBundleBytesKey, b.bundle_bytes, "gate + up + down row bytes"},
      {kUpOffsetKey, b.up_offset, "the gate row's bytes"},
      {kDownOffsetKey, b.down_offset, "gate + up row bytes"},
  };
  for (const Expected& e : expected) {
    const uint64_t v = require_uint(md, e.key);
    if (v != e.value) {
      throw std::runtime_error(std::string("pack metadata key '") + e.key + "' is " + std::to_string(v) +
                               ", expected " + std::to_string(e.value) + " (" + e.why + " for n_embd " +
                               std::to_string(n_embd) + ": gate " + std::string(type_name(gate)) + ", up " +
                               std::string(type_name(up)) + ", down " + std::string(type_name(down)) + ")");
    }
  }
  info.profile_tokens = require_uint(md, kProfileTokensKey);
  return info;
}

MatrixView gate_view(const BundleLayout& b, const void* bundles, int64_t n_ff, int64_t n_embd) {
  return part_view(b.gate_type, bundles, 0, b.bundle_bytes, n_ff, n_embd);
}

MatrixView up_view(const BundleLayout& b, const void* bundles, int64_t n_ff, int64_t n_embd) {
  return part_view(b.up_type, bundles, b.up_offset, b.bundle_bytes, n_ff, n_embd);
}

MatrixView down_rows_view(const BundleLayout& b, const void* bundles, int64_t n_ff, int64_t n_embd) {
  return part_view(b.down_type, bundles, b.down_offset, b.bundle_bytes, n_ff, n_embd);
}

std::string permutation_error(const int32_t* perm, int64_t n) {
  std::vector<int64_t> seen_at(static_cast<size_t>(n), -1);
  for (int64_t k = 0; k < n; ++k) {
    const int32_t v = perm[k];
    if (v < 0 || v >= n) {
      return "value " + std::to_string(v) + " at position " + std::to_string(k) + " is outside [0, " +
             std::to_string(n) + ")";
    }
    int64_t& first = seen_at[static_cast<size_t>(v)];
    if (first >= 0) {
      return "value " + std::to_string(v) + " appears twice (positions " + std::to_string(first) + " and " +
             std::to_string(k) + ")";
    }
    first = k;
  }
  return {};
}

}  // namespace ember::pack
