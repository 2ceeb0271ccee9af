// io::coalesce_reads: merging, alignment, the size limit, gaps, waste and the end of the file.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "io/read_coalescer.h"

using namespace ember::io;

namespace {

struct Result {
  CoalesceStats stats;
  std::vector<CoalescedRead> reads;
  std::vector<ExtentPlacement> places;
};

Result run(const std::vector<Extent>& wanted, CoalesceOptions options) {
  Result r;
  r.stats = coalesce_reads(wanted, options, r.reads, r.places);
  REQUIRE(r.reads.size() == r.stats.reads);
  // Every extent lies whole inside its read, and the read's wanted prefix covers it.
  for (size_t i = 0; i < wanted.size(); ++i) {
    const CoalescedRead& read = r.reads.at(r.places[i].read);
    CHECK(read.offset + r.places[i].offset_in_read == wanted[i].offset);
    CHECK(r.places[i].offset_in_read + wanted[i].length <= read.wanted);
    CHECK(read.wanted <= read.length);
    CHECK(read.offset % options.alignment == 0);
    CHECK(read.length % options.alignment == 0);
  }
  return r;
}

constexpr uint64_t K4 = 4096;

}  // namespace

TEST_CASE("coalesce_reads: touching and overlapping-after-alignment extents merge") {
  const CoalesceOptions opt{.file_size = 1 << 20};
  // [100, 200) and [4000, 4200) share block 0 -> blocks 0..1; [8192, 8292) touches block 1's end.
  const Result r = run({{100, 100}, {4000, 200}, {8192, 100}, {20000, 10}}, opt);
  REQUIRE(r.stats.reads == 2);
  CHECK(r.reads[0].offset == 0);
  CHECK(r.reads[0].length == 3 * K4);
  CHECK(r.reads[0].wanted == 8292);
  CHECK(r.reads[1].offset == 4 * K4);
  CHECK(r.reads[1].length == K4);
  CHECK(r.places[1].read == 0);
  CHECK(r.places[1].offset_in_read == 4000);
  CHECK(r.places[2].offset_in_read == 8192);
  CHECK(r.places[3].read == 1);
  CHECK(r.places[3].offset_in_read == 20000 - 4 * K4);
  CHECK(r.stats.bytes_wanted == 410);
  CHECK(r.stats.bytes_read == 4 * K4);
  CHECK(r.stats.bytes_wasted == 4 * K4 - 410);
}

TEST_CASE("coalesce_reads: aligned neighbours (bundles of a pack) merge without waste") {
  std::vector<Extent> wanted;
  for (uint64_t i = 0; i < 8; ++i) wanted.push_back({(10 + i) * 3 * K4, 3 * K4});
  const Result r = run(wanted, {.file_size = 1 << 20, .max_read_bytes = 1 << 20});
  REQUIRE(r.stats.reads == 1);
  CHECK(r.reads[0].offset == 30 * K4);
  CHECK(r.reads[0].length == 24 * K4);
  CHECK(r.stats.bytes_wasted == 0);
  CHECK(r.places[7].offset_in_read == 21 * K4);
}

TEST_CASE("coalesce_reads: overlapping and duplicate extents count once") {
  const Result r = run({{0, 5000}, {1000, 1000}, {1000, 1000}, {4500, 1000}}, {.file_size = 1 << 20});
  REQUIRE(r.stats.reads == 1);
  CHECK(r.reads[0].length == 2 * K4);
  CHECK(r.stats.bytes_wanted == 5500);
  CHECK(r.stats.bytes_wasted == 2 * K4 - 5500);
}

TEST_CASE("coalesce_reads: the maximum read size splits runs") {
  std::vector<Extent> wanted;
  for (uint64_t i = 0; i < 10; ++i) wanted.push_back({i * K4, K4});
  const Result r = run(wanted, {.file_size = 1 << 20, .max_read_bytes = 4 * K4});
  REQUIRE(r.stats.reads == 3);
  CHECK(r.reads[0].length == 4 * K4);
  CHECK(r.reads[1].offset == 4 * K4);
  CHECK(r.reads[2].length == 2 * K4);
  CHECK(r.places[9].read == 2);
  CHECK(r.places[9].offset_in_read == K4);
  CHECK(r.stats.bytes_wasted == 0);

  // An extent bigger than the limit still gets one read (it must land whole somewhere).
  const Result big = run({{0, 100}, {K4, 10 * K4}, {11 * K4, 10}}, {.file_size = 1 << 20, .max_read_bytes = 4 * K4});
  REQUIRE(big.stats.reads == 3);
  CHECK(big.reads[1].offset == K4);
  CHECK(big.reads[1].length == 10 * K4);

  // Overlapping the previous read but too big to merge: its own read, re-reading the shared block.
  const Result overlap = run({{0, 3 * K4 + 10}, {3 * K4 + 100, 2 * K4}}, {.file_size = 1 << 20, .max_read_bytes = 4 * K4});
  REQUIRE(overlap.stats.reads == 2);
  CHECK(overlap.reads[1].offset == 3 * K4);
  CHECK(overlap.stats.bytes_read == 4 * K4 + 3 * K4);
  CHECK(overlap.stats.bytes_wanted == (3 * K4 + 10) + 2 * K4);  // a gap of 90 bytes between them
}

TEST_CASE("coalesce_reads: gaps merge only up to max_gap_bytes") {
  const std::vector<Extent> wanted{{0, K4}, {2 * K4, K4}, {5 * K4, K4}};
  CHECK(run(wanted, {.file_size = 1 << 20}).stats.reads == 3);  // default: no bridging
  const Result one_gap = run(wanted, {.file_size = 1 << 20, .max_gap_bytes = K4});
  REQUIRE(one_gap.stats.reads == 2);
  CHECK(one_gap.reads[0].length == 3 * K4);
  CHECK(one_gap.stats.bytes_wasted == K4);
  const Result all = run(wanted, {.file_size = 1 << 20, .max_gap_bytes = 2 * K4});
  REQUIRE(all.stats.reads == 1);
  CHECK(all.stats.bytes_wasted == 3 * K4);
}

TEST_CASE("coalesce_reads: the end of the file") {
  const uint64_t size = 10 * K4 + 300;
  const Result r = run({{10 * K4 + 100, 200}}, {.file_size = size});
  REQUIRE(r.stats.reads == 1);
  CHECK(r.reads[0].offset == 10 * K4);
  CHECK(r.reads[0].length == K4);  // the file end rounded up: never a block past it
  CHECK(r.reads[0].wanted == 300);  // a direct read returns 300 bytes here; that is enough
  CHECK(r.stats.bytes_read == 300);  // what the read transfers, not the block
  CHECK(r.stats.bytes_wasted == 100);

  const Result merged = run({{9 * K4, 10}, {size - 1, 1}}, {.file_size = size});
  REQUIRE(merged.stats.reads == 1);
  CHECK(merged.reads[0].length == 2 * K4);
  CHECK(merged.reads[0].wanted == K4 + 300);
}

TEST_CASE("coalesce_reads: alignment 1 (buffered files) reads exactly the extents") {
  const Result r = run({{10, 5}, {15, 5}, {100, 1}}, {.file_size = 1000, .alignment = 1});
  REQUIRE(r.stats.reads == 2);
  CHECK(r.reads[0].offset == 10);
  CHECK(r.reads[0].length == 10);
  CHECK(r.stats.bytes_wasted == 0);
}

TEST_CASE("coalesce_reads: bad input is named") {
  const auto message = [](std::vector<Extent> wanted, CoalesceOptions opt) -> std::string {
    std::vector<CoalescedRead> reads;
    std::vector<ExtentPlacement> places;
    try {
      coalesce_reads(wanted, opt, reads, places);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  const CoalesceOptions opt{.file_size = 100000};
  CHECK(message({{0, 10}, {50, 0}}, opt) == "coalesce_reads: extent 1 [50, +0) has zero length");
  CHECK(message({{99990, 11}}, opt) == "coalesce_reads: extent 0 [99990, +11) is outside the file of 100000 bytes");
  CHECK(message({{UINT64_MAX - 5, 10}}, opt).find("outside the file") != std::string::npos);
  CHECK(message({{500, 10}, {100, 10}}, opt).find("extent 1 [100, +10) is out of order") != std::string::npos);
  CHECK(message({{0, 10}}, {.file_size = 100, .alignment = 3000}).find("not a power of two") != std::string::npos);
  CHECK(message({{0, 10}}, {.file_size = 100, .max_read_bytes = 100}).find("below the alignment") != std::string::npos);
  CHECK(message({{0, 5ull << 30}}, {.file_size = 6ull << 30}).find("too large for one read") != std::string::npos);
  CHECK(message({}, opt).empty());

  // Spans that are too small.
  const std::vector<Extent> wanted{{0, 10}, {K4 * 10, 10}};
  CoalescedRead reads[1];
  ExtentPlacement places[2];
  CHECK_THROWS_AS(coalesce_reads(wanted, opt, reads, places), std::length_error);
  CHECK_THROWS_AS(coalesce_reads(wanted, opt, std::span<CoalescedRead>(), std::span<ExtentPlacement>(places, 1)),
                  std::length_error);
}

TEST_CASE("coalesce_reads: vectors with capacity are reused without reallocation") {
  std::vector<CoalescedRead> reads;
  std::vector<ExtentPlacement> places;
  reads.reserve(16);
  places.reserve(16);
  const CoalescedRead* reads_data = reads.data();
  const ExtentPlacement* places_data = places.data();
  for (int round = 0; round < 3; ++round) {
    std::vector<Extent> wanted;
    for (uint64_t i = 0; i < 16; ++i) wanted.push_back({i * 3 * K4 + round, 10});
    const CoalesceStats s = coalesce_reads(wanted, {.file_size = 1 << 20}, reads, places);
    CHECK(s.reads == 16);
    CHECK(reads.data() == reads_data);
    CHECK(places.data() == places_data);
  }
}
