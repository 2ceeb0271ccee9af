#include "io/read_coalescer.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace ember::io {
namespace {

[[noreturn]] void reject(size_t index, const Extent& e, const char* problem) {
  std::string msg = "coalesce_reads: extent ";
  msg += std::to_string(index);
  msg += " [";
  msg += std::to_string(e.offset);
  msg += ", +";
  msg += std::to_string(e.length);
  msg += ") ";
  msg += problem;
  throw std::invalid_argument(msg);
}

}  // namespace

CoalesceStats coalesce_reads(std::span<const Extent> wanted, const CoalesceOptions& options,
                             std::span<CoalescedRead> reads, std::span<ExtentPlacement> placements) {
  const uint64_t align = options.alignment;
  if (align == 0 || (align & (align - 1)) != 0) {
    throw std::invalid_argument("coalesce_reads: alignment " + std::to_string(align) + " is not a power of two");
  }
  if (options.max_read_bytes < align) {
    throw std::invalid_argument("coalesce_reads: max_read_bytes " + std::to_string(options.max_read_bytes) +
                                " is below the alignment " + std::to_string(align));
  }
  if (placements.size() < wanted.size()) {
    throw std::length_error("coalesce_reads: room for " + std::to_string(placements.size()) +
                            " placements, " + std::to_string(wanted.size()) + " extents");
  }
  const auto down = [align](uint64_t v) { return v & ~(align - 1); };
  const auto up = [align](uint64_t v) { return (v + align - 1) & ~(align - 1); };
  const uint64_t file_size = options.file_size;
  // Extents end inside the file, so aligned ends stay at or below this; the min() below only
  // restates it where a read's length is decided.
  const uint64_t file_end_aligned = up(file_size);

  CoalesceStats stats;
  uint64_t covered_end = 0;  // furthest wanted byte so far, for counting the union of the extents
  for (size_t i = 0; i < wanted.size(); ++i) {
    const Extent& e = wanted[i];
    if (e.length == 0) reject(i, e, "has zero length");
    if (e.offset > file_size || e.length > file_size - e.offset) {
      reject(i, e, ("is outside the file of " + std::to_string(file_size) + " bytes").c_str());
    }
    if (i > 0 && e.offset < wanted[i - 1].offset) reject(i, e, "is out of order: extents must be sorted by offset");
    const uint64_t end = e.offset + e.length;
    const uint64_t a_begin = down(e.offset);
    const uint64_t a_end = std::min(up(end), file_end_aligned);
    if (a_end - a_begin > std::numeric_limits<uint32_t>::max() - align) reject(i, e, "is too large for one read");

    if (end > covered_end) {
      stats.bytes_wanted += end - std::max(e.offset, covered_end);
      covered_end = end;
    }

    if (stats.reads > 0) {
      CoalescedRead& cur = reads[stats.reads - 1];
      const uint64_t cur_end = cur.offset + cur.length;
      const uint64_t merged_end = std::max(cur_end, a_end);
      // a_begin >= cur.offset: extents are sorted, and cur starts at an earlier extent's block.
      const bool close_enough = a_begin <= cur_end || a_begin - cur_end <= options.max_gap_bytes;
      if (close_enough && merged_end - cur.offset <= options.max_read_bytes) {
        cur.length = static_cast<uint32_t>(merged_end - cur.offset);
        cur.wanted = std::max(cur.wanted, static_cast<uint32_t>(end - cur.offset));
        placements[i] = ExtentPlacement{static_cast<uint32_t>(stats.reads - 1), static_cast<uint32_t>(e.offset - cur.offset)};
        continue;
      }
    }
    if (stats.reads == reads.size()) {
      throw std::length_error("coalesce_reads: room for " + std::to_string(reads.size()) + " reads is not enough");
    }
    reads[stats.reads] = CoalescedRead{a_begin, static_cast<uint32_t>(a_end - a_begin), static_cast<uint32_t>(end - a_begin)};
    placements[i] = ExtentPlacement{static_cast<uint32_t>(stats.reads), static_cast<uint32_t>(e.offset - a_begin)};
    ++stats.reads;
  }

  for (size_t r = 0; r < stats.reads; ++r) {
    stats.bytes_read += std::min<uint64_t>(reads[r].offset + reads[r].length, file_size) - reads[r].offset;
  }
  stats.bytes_wasted = stats.bytes_read - stats.bytes_wanted;
  return stats;
}

CoalesceStats coalesce_reads(std::span<const Extent> wanted, const CoalesceOptions& options,
                             std::vector<CoalescedRead>& reads, std::vector<ExtentPlacement>& placements) {
  reads.resize(wanted.size());
  placements.resize(wanted.size());
  const CoalesceStats stats = coalesce_reads(wanted, options, std::span<CoalescedRead>(reads),
                                             std::span<ExtentPlacement>(placements));
  reads.resize(stats.reads);
  return stats;
}

}  // namespace ember::io
