#pragma once
// One hash for token texts and merge pairs (FNV-1a, 64-bit: core/util/fnv1a.h): cheap on the short strings vocabularies
// hold, and a pair hashes the same whether it is stored joined or looked up as two views.
#include <cstdint>
#include <string_view>

#include "core/util/fnv1a.h"

namespace ember {

inline uint64_t hash_pair(std::string_view left, std::string_view right) {
  // The left length goes in too, so ("ab","c") and ("a","bc") differ.
  return fnv1a64(right, fnv1a64(left) ^ (left.size() * 0x9e3779b97f4a7c15ull));
}

// Open-addressing slot capacity for n entries: a power of two, at most half full.
inline size_t table_capacity(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  return cap;
}

}  // namespace ember
