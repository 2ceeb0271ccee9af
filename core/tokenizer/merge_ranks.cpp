#include "core/tokenizer/merge_ranks.h"

#include "core/tokenizer/string_hash.h"

namespace ember {

void MergeRanks::reserve(size_t n) {
  merges_.reserve(n);
  text_.reserve(n * 8);
  if (slots_.size() < table_capacity(n)) {
    slots_.assign(table_capacity(n), Slot{});
    for (int32_t r = 0; r < static_cast<int32_t>(merges_.size()); ++r) {
      if (merges_[r].left_size == kDuplicate) continue;
      const uint64_t h = hash_pair(left_of(merges_[r]), right_of(merges_[r]));
      size_t i = h & (slots_.size() - 1);
      while (slots_[i].rank >= 0) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = {static_cast<uint32_t>(h), r};
    }
  }
}

void MergeRanks::grow() { reserve(merges_.size() * 2 + 16); }

void MergeRanks::add(std::string_view left, std::string_view right) {
  if (slots_.size() < table_capacity(merges_.size() + 1)) grow();
  const uint64_t h = hash_pair(left, right);
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  for (; slots_[i].rank >= 0; i = (i + 1) & mask) {
    const Merge& m = merges_[slots_[i].rank];
    if (slots_[i].hash_low == static_cast<uint32_t>(h) && left_of(m) == left && right_of(m) == right) {
      merges_.push_back(Merge{0, kDuplicate, 0});  // keeps ranks = positions; the earlier rank stays in the table
      return;
    }
  }
  const auto rank = static_cast<int32_t>(merges_.size());
  merges_.push_back(Merge{static_cast<uint32_t>(text_.size()), static_cast<uint32_t>(left.size()),
                          static_cast<uint32_t>(right.size())});
  text_.append(left);
  text_.append(right);
  slots_[i] = {static_cast<uint32_t>(h), rank};
}

int32_t MergeRanks::rank(std::string_view left, std::string_view right) const {
  if (slots_.empty()) return -1;
  const uint64_t h = hash_pair(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask; slots_[i].rank >= 0; i = (i + 1) & mask) {
    const Merge& m = merges_[slots_[i].rank];
    if (slots_[i].hash_low == static_cast<uint32_t>(h) && left_of(m) == left && right_of(m) == right) {
      return slots_[i].rank;
    }
  }
  return -1;
}

}  // namespace ember
