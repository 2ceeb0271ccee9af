#pragma once
// The neuron-bundle pack (`ember pack`, docs/pack-format.md): a GGUF whose FFN layers are stored as
// bundles, bundle k = [gate row | up row | down column] of source neuron perm[k], hottest first, so
// that one neuron is one contiguous read. This file holds what the writer (core/pack) and the
// loader (ModelWeights) must agree on: key and tensor names, the byte layout of a bundle, and the
// checks a loader applies to a file it did not write.
#include <cstdint>
#include <string>

#include "core/gguf/gguf_value.h"
#include "core/kernels/matmul.h"
#include "core/tensor/ggml_type.h"

namespace ember::pack {

inline constexpr uint32_t kVersion = 1;
inline constexpr uint64_t kAlignment = 4096;  // general.alignment of a pack: O_DIRECT reads

inline constexpr const char* kVersionKey = "ember.pack.version";            // u32
inline constexpr const char* kBundleBytesKey = "ember.pack.bundle_bytes";   // u64
inline constexpr const char* kGateTypeKey = "ember.pack.gate_type";         // u32 ggml type id
inline constexpr const char* kUpTypeKey = "ember.pack.up_type";             // u32
inline constexpr const char* kDownTypeKey = "ember.pack.down_type";         // u32
inline constexpr const char* kUpOffsetKey = "ember.pack.up_offset";         // u64, inside a bundle
inline constexpr const char* kDownOffsetKey = "ember.pack.down_offset";     // u64, inside a bundle
inline constexpr const char* kProfileTokensKey = "ember.pack.profile_tokens";  // u64, 0: no profile

std::string bundles_name(int64_t layer);  // blk.N.ffn_bundles    I8  {bundle_bytes, n_ff}
std::string perm_name(int64_t layer);     // blk.N.neuron_perm    I32 {n_ff}: bundle k = source neuron perm[k]
std::string freq_name(int64_t layer);     // blk.N.neuron_freq    F32 {n_ff}: activation frequency of bundle k

// One bundle: the gate row at 0, the up row at up_offset, the down column at down_offset, each
// n_embd values in its own type, nothing between them; bundles follow each other without padding.
struct BundleLayout {
  GgmlType gate_type = GgmlType::F32, up_type = GgmlType::F32, down_type = GgmlType::F32;
  uint64_t gate_bytes = 0, up_bytes = 0, down_bytes = 0;  // one row of n_embd values each
  uint64_t up_offset = 0, down_offset = 0, bundle_bytes = 0;
};

// Throws std::invalid_argument naming the part when a type has no kernels or n_embd is not a
// multiple of its block size.
BundleLayout compute_bundle_layout(GgmlType gate, GgmlType up, GgmlType down, int64_t n_embd);

struct PackInfo {
  uint32_t version = kVersion;
  BundleLayout layout;
  uint64_t profile_tokens = 0;
};

// True when the metadata carries ember.pack.version (the file claims to be a pack).
bool is_pack(const gguf::Metadata& md);

// Reads and checks the ember.pack.* keys against the layout that the types and n_embd imply.
// Throws std::runtime_error naming the key on a missing key, a wrong value type, an unsupported
// version or type, or offsets/sizes that disagree with the layout.
PackInfo read_pack_info(const gguf::Metadata& md, int64_t n_embd);

// Views of one layer's bundle tensor (n_ff bundles from `bundles`): gate/up are ordinary
// (n_embd -> n_ff) matrices whose rows lie bundle_bytes apart; the down view holds one row per
// neuron (core/sparse/neuron_rows.h).
MatrixView gate_view(const BundleLayout& b, const void* bundles, int64_t n_ff, int64_t n_embd);
MatrixView up_view(const BundleLayout& b, const void* bundles, int64_t n_ff, int64_t n_embd);
MatrixView down_rows_view(const BundleLayout& b, const void* bundles, int64_t n_ff, int64_t n_embd);

// Empty when perm holds every value of [0, n) exactly once; otherwise what is wrong ("value 7
// appears twice (positions 3 and 9)", "value -1 at position 4 is outside [0, 256)").
std::string permutation_error(const int32_t* perm, int64_t n);

}  // namespace ember::pack
