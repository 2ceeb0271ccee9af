#pragma once
// `ember pack --verify`: checks a pack against the model it was made from, bundle by bundle.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ember::pack {

struct VerifyReport {
  static constexpr size_t kMaxListed = 10;
  uint64_t metadata_checked = 0;  // source keys compared
  uint64_t tensors_checked = 0;   // source tensors copied unchanged (fc2: rows permuted) compared
  uint64_t bundles_checked = 0;
  uint64_t mismatches = 0;
  std::vector<std::string> first_mismatches;  // at most kMaxListed, in the order found
  bool ok() const { return mismatches == 0; }
};

// Both files must load as models (the pack's own checks: keys, layout, shapes, permutation,
// frequencies; a failure there throws std::runtime_error naming it). Then every comparison that
// fails counts as a mismatch: metadata values, every copied tensor byte for byte, fc2 row k ==
// source row perm[k], bundle k's gate/up bytes == source rows perm[k] and its down column == the
// source's (ffn_down_t bytes, or F32/F16 of the ffn_down column), no tensor or key unaccounted for.
VerifyReport verify_pack(const std::string& source_path, const std::string& pack_path,
                         const std::function<void(int64_t layers_done, int64_t n_layer)>& on_layer = {});

}  // namespace ember::pack
