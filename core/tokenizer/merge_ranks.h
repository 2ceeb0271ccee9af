#pragma once
// BPE merge priorities: (left, right) -> rank, looked up by a pair of string_views without building
// a string per lookup (the merge loop asks once per adjacent symbol pair). Flat storage: loading a
// 150k-merge vocabulary makes a few large allocations, not one per merge.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

class MergeRanks {
 public:
  void reserve(size_t n);
  // Ranks are the insertion order; a repeated pair keeps its first (lower) rank.
  void add(std::string_view left, std::string_view right);
  // -1 when the pair is not a merge.
  int32_t rank(std::string_view left, std::string_view right) const;
  size_t size() const { return merges_.size(); }

 private:
  struct Merge {
    uint32_t offset, left_size, right_size;
  };
  static constexpr uint32_t kDuplicate = 0xFFFFFFFF;  // left_size of a repeated pair's placeholder
  struct Slot {
    uint32_t hash_low = 0;
    int32_t rank = -1;
  };
  std::string_view left_of(const Merge& m) const { return std::string_view(text_).substr(m.offset, m.left_size); }
  std::string_view right_of(const Merge& m) const {
    return std::string_view(text_).substr(m.offset + m.left_size, m.right_size);
  }
  void grow();

  std::string text_;  // every merge's left and right, back to back
  std::vector<Merge> merges_;
  std::vector<Slot> slots_;
};

}  // namespace ember
