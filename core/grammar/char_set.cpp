#include "core/grammar/char_set.h"

#include <algorithm>

namespace ember::grammar {

CharSet CharSet::range(uint32_t lo, uint32_t hi) {
  CharSet s;
  s.add(lo, hi);
  return s;
}

void CharSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  hi = std::min(hi, kMaxCodePoint);
  ranges_.push_back({lo, hi});
  std::sort(ranges_.begin(), ranges_.end(), [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  std::vector<CodeRange> merged;
  for (const CodeRange& r : ranges_) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
  refresh_ascii();
}

CharSet CharSet::complement() const {
  CharSet out;
  uint32_t next = 0;
  for (const CodeRange& r : ranges_) {
    if (r.lo > next) out.ranges_.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.ranges_.push_back({next, kMaxCodePoint});
  out.refresh_ascii();
  return out;
}

CharSet CharSet::intersect(const CharSet& other) const {
  CharSet out;
  for (const CodeRange& a : ranges_) {
    for (const CodeRange& b : other.ranges_) {
      const uint32_t lo = std::max(a.lo, b.lo), hi = std::min(a.hi, b.hi);
      if (lo <= hi) out.ranges_.push_back({lo, hi});
    }
  }
  // Pairs of sorted disjoint lists intersect into sorted disjoint pieces; merge adjacent ones.
  std::vector<CodeRange> merged;
  for (const CodeRange& r : out.ranges_) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  out.ranges_ = std::move(merged);
  out.refresh_ascii();
  return out;
}

bool CharSet::contains(uint32_t cp) const {
  if (cp < 128) return (ascii_[cp >> 6] >> (cp & 63)) & 1;
  // Ranges are few (a handful for real grammars), so a linear scan beats a binary search.
  for (const CodeRange& r : ranges_) {
    if (cp < r.lo) return false;
    if (cp <= r.hi) return true;
  }
  return false;
}

bool CharSet::intersects(uint32_t lo, uint32_t hi) const {
  for (const CodeRange& r : ranges_) {
    if (r.lo > hi) return false;
    if (r.hi >= lo) return true;
  }
  return false;
}

void CharSet::refresh_ascii() {
  ascii_[0] = ascii_[1] = 0;
  for (const CodeRange& r : ranges_) {
    if (r.lo >= 128) break;
    for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 127); ++c) ascii_[c >> 6] |= uint64_t{1} << (c & 63);
  }
}

}  // namespace ember::grammar
