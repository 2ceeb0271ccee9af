#pragma once
// Read coalescing: turns the byte extents a caller wants from a file (e.g. the cold neuron bundles
// a token needs, sorted by offset) into few aligned reads. Extents whose aligned blocks touch or
// overlap (or lie at most max_gap_bytes apart) merge into one read while it stays within
// max_read_bytes; each extent lands whole inside one read, and the result says where. A pure
// function: it allocates nothing when the outputs have room.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ember::io {

struct Extent {
  uint64_t offset = 0;
  uint64_t length = 0;  // > 0
};

struct CoalescedRead {
  uint64_t offset = 0;  // a multiple of the alignment
  uint32_t length = 0;  // a multiple of the alignment; may run past the end of the file (see below)
  // Leading bytes of the read that hold wanted data (up to the end of its last extent): pass as
  // ReadRequest::wanted, so that a read cut short by the end of the file still succeeds.
  uint32_t wanted = 0;
};

struct ExtentPlacement {
  uint32_t read = 0;            // index into the reads
  uint32_t offset_in_read = 0;  // where the extent's first byte lands in that read's buffer
};

struct CoalesceOptions {
  uint64_t file_size = 0;            // extents must lie inside the file
  uint32_t alignment = 4096;         // a power of two; 4096 for O_DIRECT files
  uint32_t max_read_bytes = 128 << 10;  // merging stops here (a single bigger extent still gets one read)
  // Unwanted bytes a merge may bridge between two extents' aligned blocks. 0: only blocks that touch
  // or overlap merge. Bridging trades wasted bytes for fewer reads (worth it on devices where a
  // request costs more than a few KiB of transfer).
  uint32_t max_gap_bytes = 0;
};

struct CoalesceStats {
  size_t reads = 0;
  uint64_t bytes_read = 0;    // what the reads transfer: their lengths, cut at the end of the file
  uint64_t bytes_wanted = 0;  // the union of the extents (overlapping extents count once)
  uint64_t bytes_wasted = 0;  // bytes_read - bytes_wanted: alignment padding, bridged gaps, re-reads
};

// `wanted` sorted by offset (overlaps allowed). Writes the reads to reads[0, stats.reads) and one
// placement per extent. Throws std::invalid_argument naming the extent when the input is unsorted,
// empty-length, outside the file or too large for one read (4 GiB), or the options are invalid;
// std::length_error when `reads` or `placements` is too small (wanted.size() of each always
// suffices: every read holds at least one extent).
//
// The end of the file: a read's aligned end never passes the file size rounded up to the
// alignment. A direct read of that last partial block returns short (only the bytes up to the end of
// the file); CoalescedRead::wanted lets the reader accept that (batch_reader.h).
//
// Reads may overlap: when an extent overlaps the previous read but merging would pass
// max_read_bytes, it gets its own read, which re-reads the shared blocks (counted as waste).
CoalesceStats coalesce_reads(std::span<const Extent> wanted, const CoalesceOptions& options,
                             std::span<CoalescedRead> reads, std::span<ExtentPlacement> placements);

// The same into vectors: resized to fit, which allocates only when their capacity is short.
CoalesceStats coalesce_reads(std::span<const Extent> wanted, const CoalesceOptions& options,
                             std::vector<CoalescedRead>& reads, std::vector<ExtentPlacement>& placements);

}  // namespace ember::io
