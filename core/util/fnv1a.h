#pragma once
// FNV-1a, 64-bit: a cheap, stable hash for short keys (token texts, merge pairs) and for
// fingerprints and checksums of small files. Stable across builds and machines, so values may be
// stored in files. Chain calls through `state` to hash several pieces as one.
#include <cstdint>
#include <span>
#include <string_view>

namespace ember {

inline constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnv1a64Prime = 0x100000001b3ull;

constexpr uint64_t fnv1a64(std::span<const uint8_t> bytes, uint64_t state = kFnv1a64Offset) {
  for (uint8_t b : bytes) {
    state ^= b;
    state *= kFnv1a64Prime;
  }
  return state;
}

inline uint64_t fnv1a64(std::string_view text, uint64_t state = kFnv1a64Offset) {
  return fnv1a64(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()), state);
}

}  // namespace ember
