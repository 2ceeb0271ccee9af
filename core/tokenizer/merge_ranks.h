#pragma once
// BPE merge priorities: (left, right) -> rank, looked up by a pair of string_views without
// building a string per lookup (the merge loop asks once per adjacent symbol pair).
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ember {

struct MergePair {
  std::string_view left, right;
};

struct MergeKey {
  std::string joined;  // left + right
  uint32_t left_size = 0;
  MergePair pair() const {
    std::string_view j(joined);
    return {j.substr(0, left_size), j.substr(left_size)};
  }
};

struct MergeKeyHash {
  using is_transparent = void;
  size_t operator()(const MergePair& p) const {
    const size_t a = std::hash<std::string_view>{}(p.left);
    const size_t b = std::hash<std::string_view>{}(p.right);
    return a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  }
  size_t operator()(const MergeKey& k) const { return (*this)(k.pair()); }
};

struct MergeKeyEqual {
  using is_transparent = void;
  static bool same(const MergePair& a, const MergePair& b) { return a.left == b.left && a.right == b.right; }
  bool operator()(const MergeKey& a, const MergeKey& b) const { return same(a.pair(), b.pair()); }
  bool operator()(const MergePair& a, const MergeKey& b) const { return same(a, b.pair()); }
  bool operator()(const MergeKey& a, const MergePair& b) const { return same(a.pair(), b); }
};

class MergeRanks {
 public:
  // The first occurrence of a pair keeps its (lower) rank.
  void add(std::string_view left, std::string_view right, int32_t rank) {
    MergeKey key{std::string(left) + std::string(right), static_cast<uint32_t>(left.size())};
    ranks_.emplace(std::move(key), rank);
  }
  // -1 when the pair is not a merge.
  int32_t rank(std::string_view left, std::string_view right) const {
    auto it = ranks_.find(MergePair{left, right});
    return it == ranks_.end() ? -1 : it->second;
  }
  size_t size() const { return ranks_.size(); }
  void reserve(size_t n) { ranks_.reserve(n); }

 private:
  std::unordered_map<MergeKey, int32_t, MergeKeyHash, MergeKeyEqual> ranks_;
};

}  // namespace ember
