#pragma once
// Rounding sizes and offsets up to a multiple (O_DIRECT blocks, cache slots, hot regions). The
// multiple need not be a power of two: a device's direct-I/O alignment is whatever it reports.
#include <cstdint>
#include <limits>

namespace ember {

// v rounded up to a multiple of a (a > 0). For values known to be far from 2^64 (buffer sizes).
constexpr uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// The same for values that come from a file or a user: false (out untouched) when the result does
// not fit 64 bits, so the caller can name what overflowed.
constexpr bool checked_align_up(uint64_t v, uint64_t a, uint64_t* out) {
  if (v > std::numeric_limits<uint64_t>::max() - (a - 1)) return false;
  *out = align_up(v, a);
  return true;
}

}  // namespace ember
