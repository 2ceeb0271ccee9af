#pragma once
// A set of Unicode code points as sorted, disjoint, non-adjacent closed ranges: what one terminal
// of a grammar matches ("a", [a-z0-9], [^"\\], .). Negation is resolved when the set is built, so
// matching never needs to know how the set was written.
#include <cstdint>
#include <vector>

namespace ember::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CodeRange {
  uint32_t lo;
  uint32_t hi;  // inclusive
  bool operator==(const CodeRange&) const = default;
};

class CharSet {
 public:
  CharSet() = default;
  static CharSet single(uint32_t cp) { return range(cp, cp); }
  static CharSet range(uint32_t lo, uint32_t hi);
  static CharSet any() { return range(0, kMaxCodePoint); }

  void add(uint32_t lo, uint32_t hi);  // keeps the ranges normalised
  CharSet complement() const;
  CharSet intersect(const CharSet& other) const;

  bool contains(uint32_t cp) const;
  // Whether some code point in [lo, hi] is in the set: how a partial UTF-8 sequence (whose code
  // point is only known to lie in a range) is checked before its last byte arrives.
  bool intersects(uint32_t lo, uint32_t hi) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<CodeRange>& ranges() const { return ranges_; }
  bool operator==(const CharSet&) const = default;

 private:
  std::vector<CodeRange> ranges_;
  // Bit i set when ASCII code point i is in the set: most terminals of real grammars (JSON) are
  // ASCII, and a bit test is cheaper than a range search.
  uint64_t ascii_[2] = {0, 0};
  void refresh_ascii();
};

}  // namespace ember::grammar
