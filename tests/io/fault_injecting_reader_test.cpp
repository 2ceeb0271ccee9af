// io::FaultInjectingReader: injected failures reach the right request (by tag), the other requests
// of the batch are unharmed, and later batches work.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/direct_file.h"
#include "io/fault_injecting_reader.h"
#include "io/file.h"
#include "io/pread_pool_reader.h"
#include "io/uring_reader.h"
#include "tests/io/io_test_files.h"

using namespace ember::io;
using ember::io_test::TestFile;

namespace {

constexpr uint32_t kBlocks = 32;

struct Fixture {
  std::string contents = ember::io_test::random_bytes(kBlocks * 4096, 11);
  TestFile tmp{ember::io_test::disk_dir(), contents};
  DirectFile file = DirectFile::open(tmp.path());
  AlignedBuffer buf{kBlocks * 4096};

  // One 2-block read per even block, tag = 100 + index.
  std::vector<ReadRequest> batch(uint32_t n, uint32_t first_block = 0) {
    std::vector<ReadRequest> b;
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t block = (first_block + 2 * i) % kBlocks;
      b.push_back({.offset = block * 4096ull, .length = 2 * 4096, .dst = buf.data() + block * 4096, .tag = 100 + i});
    }
    return b;
  }

  // Submits, harvests everything, returns tag -> result and checks the data of the successes.
  std::map<uint64_t, int64_t> run(BatchReader& reader, const std::vector<ReadRequest>& b) {
    std::memset(buf.data(), 0, buf.size());
    reader.submit(b);
    std::map<uint64_t, int64_t> results;
    ReadCompletion out[8];
    while (reader.in_flight() > 0) {
      const size_t n = reader.harvest(out, 1);
      for (size_t i = 0; i < n; ++i) {
        CHECK(results.count(out[i].tag) == 0);
        results[out[i].tag] = out[i].result;
        const ReadRequest& r = b.at(out[i].tag - 100);
        CHECK(out[i].offset == r.offset);
        CHECK(out[i].length == r.length);
        if (out[i].ok()) CHECK(std::memcmp(r.dst, contents.data() + r.offset, out[i].result) == 0);
      }
    }
    CHECK(results.size() == b.size());
    return results;
  }
};

std::vector<std::unique_ptr<BatchReader>> inner_readers(const DirectFile& file) {
  std::vector<std::unique_ptr<BatchReader>> readers;
  readers.push_back(std::make_unique<PreadPoolReader>(file, PreadPoolOptions{.threads = 2, .capacity = 16}));
  if (ember::io_test::uring_available("fault injection over io_uring")) {
    readers.push_back(std::make_unique<UringReader>(file, UringOptions{.queue_depth = 4, .capacity = 16}));
  }
  return readers;
}

}  // namespace

TEST_CASE("FaultInjectingReader: the Nth read fails with the given errno, by tag; later batches work") {
  Fixture fx;
  for (auto& inner : inner_readers(fx.file)) {
    const std::string inner_name = inner->backend_name();
    CAPTURE(inner_name);
    FaultInjectingReader reader(std::move(inner), FaultPlan{.fail_nth = 11, .fail_errno = EIO});
    CHECK(reader.backend_name() == "fault(" + inner_name + ")");
    CHECK(reader.capacity() == 16);
    auto first = fx.run(reader, fx.batch(8));  // reads 0..7: untouched
    for (auto& [tag, result] : first) CHECK(result == 2 * 4096);
    auto second = fx.run(reader, fx.batch(8, 1));  // reads 8..15: the 4th of this batch fails
    for (auto& [tag, result] : second) CHECK(result == (tag == 103 ? -EIO : 2 * 4096));
    CHECK(describe_failure("pack", ReadCompletion{103, -EIO, 4096, 8192}) == "pack: read [4096, +8192) failed: Input/output error");
    auto third = fx.run(reader, fx.batch(8));
    for (auto& [tag, result] : third) CHECK(result == 2 * 4096);
    CHECK(reader.reads_submitted() == 24);
  }
}

TEST_CASE("FaultInjectingReader: every read in a byte range fails") {
  Fixture fx;
  for (auto& inner : inner_readers(fx.file)) {
    FaultInjectingReader reader(std::move(inner),
                                FaultPlan{.range_begin = 6 * 4096 + 1, .range_end = 9 * 4096, .range_errno = EBADMSG});
    // Reads of blocks [4,6) miss the range by a byte; [6,8) and [8,10) hit it.
    auto results = fx.run(reader, fx.batch(8));
    for (auto& [tag, result] : results) {
      const uint64_t block = 2 * (tag - 100);
      CHECK(result == ((block == 6 || block == 8) ? -EBADMSG : 2 * 4096));
    }
    reader.set_plan({});
    for (auto& [tag, result] : fx.run(reader, fx.batch(8))) CHECK(result == 2 * 4096);
  }
}

TEST_CASE("FaultInjectingReader: short reads deliver a prefix and fail when the wanted bytes are missing") {
  Fixture fx;
  for (auto& inner : inner_readers(fx.file)) {
    FaultInjectingReader reader(std::move(inner), FaultPlan{.short_nth = 2, .short_bytes = 4096});
    auto results = fx.run(reader, fx.batch(4));
    for (auto& [tag, result] : results) CHECK(result == (tag == 102 ? -ENODATA : 2 * 4096));
    // The delivered prefix is the file's.
    CHECK(std::memcmp(fx.buf.data() + 4 * 4096, fx.contents.data() + 4 * 4096, 4096) == 0);

    // Every read short; requests that want only the first block are satisfied by it.
    reader.set_plan(FaultPlan{.short_every = true, .short_bytes = 4096});
    auto b = fx.batch(4);
    b[1].wanted = 4096;
    results = fx.run(reader, b);
    for (auto& [tag, result] : results) CHECK(result == (tag == 101 ? 4096 : -ENODATA));

    // short_bytes 0: nothing delivered.
    reader.set_plan(FaultPlan{.short_every = true, .short_bytes = 0});
    for (auto& [tag, result] : fx.run(reader, fx.batch(3))) CHECK(result == -ENODATA);

    reader.set_plan({});
    for (auto& [tag, result] : fx.run(reader, fx.batch(8))) CHECK(result == 2 * 4096);
    CHECK(reader.in_flight() == 0);
  }
}

TEST_CASE("FaultInjectingReader: a batch the inner reader refuses leaves no trace") {
  Fixture fx;
  for (auto& inner : inner_readers(fx.file)) {
    const bool direct = fx.file.is_direct();
    FaultInjectingReader reader(std::move(inner), FaultPlan{.fail_nth = 0});
    auto b = fx.batch(3);
    if (direct) b[2].offset = 10;  // misaligned: the inner reader refuses the batch
    else b[2].length = 0;          // refused by the wrapper's own check
    CHECK_THROWS_AS(reader.submit(b), std::invalid_argument);
    CHECK(reader.in_flight() == 0);
    CHECK(reader.reads_submitted() == 0);
    std::vector<ReadRequest> too_many(17, fx.batch(1)[0]);
    CHECK_THROWS_AS(reader.submit(too_many), std::invalid_argument);
    // Read 0 still fails as planned.
    for (auto& [tag, result] : fx.run(reader, fx.batch(2))) CHECK(result == (tag == 100 ? -EIO : 2 * 4096));
  }
}
