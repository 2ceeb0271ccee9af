// io::UringReader and io::PreadPoolReader on the same random batches: every completion must carry
// its request's tag and bytes, with and without O_DIRECT, in batches bigger than the queue depth,
// with and without a registered arena.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/batch_reader.h"
#include "io/direct_file.h"
#include "io/file.h"
#include "io/pread_pool_reader.h"
#include "io/uring_reader.h"
#include "tests/io/io_test_files.h"

using namespace ember::io;
using ember::io_test::TestFile;

namespace {

enum class Backend { Uring, Pread };

constexpr uint32_t kQueueDepth = 8;
constexpr uint32_t kCapacity = 96;  // > queue depth: batches go to the kernel in rounds
constexpr uint32_t kSlotBytes = 4 * 4096;

std::unique_ptr<BatchReader> make_reader(Backend backend, const DirectFile& file) {
  if (backend == Backend::Uring) {
    // 64 KiB chunks: some reads straddle two registered buffers and must fall back to plain reads.
    return std::make_unique<UringReader>(file, UringOptions{.queue_depth = kQueueDepth, .capacity = kCapacity,
                                                            .fixed_buffer_chunk = 64 << 10});
  }
  return std::make_unique<PreadPoolReader>(file, PreadPoolOptions{.threads = 3, .capacity = kCapacity});
}

const char* name(Backend b) { return b == Backend::Uring ? "io_uring" : "pread"; }

// Random requests over the whole file, including reads running past its end (whose wanted bytes
// stop at the end), issued in random batch sizes and harvested in random amounts.
void check_random_batches(BatchReader& reader, const DirectFile& file, const std::string& contents, uint8_t* arena,
                          uint32_t seed) {
  std::mt19937 rng(seed);
  const uint64_t size = contents.size();
  const uint64_t blocks = (size + 4095) / 4096;
  std::vector<ReadRequest> batch(kCapacity);
  std::vector<ReadCompletion> out(kCapacity);
  std::vector<int> seen(kCapacity);
  uint64_t completions = 0;
  for (int round = 0; round < 12; ++round) {
    const size_t n = round % 3 == 0 ? kCapacity : 1 + rng() % kCapacity;
    for (size_t i = 0; i < n; ++i) {
      ReadRequest& r = batch[i];
      if (file.is_direct()) {
        r.offset = (rng() % blocks) * 4096;
        r.length = 4096 * (1 + rng() % 4);
      } else {
        r.offset = rng() % size;
        r.length = 1 + rng() % kSlotBytes;
      }
      r.wanted = static_cast<uint32_t>(std::min<uint64_t>(r.length, size - r.offset));
      r.dst = arena + i * kSlotBytes;
      r.tag = (static_cast<uint64_t>(round) << 32) | i;
      std::memset(r.dst, 0xEE, kSlotBytes);
    }
    reader.submit(std::span<const ReadRequest>(batch.data(), n));
    CHECK(reader.in_flight() == n);
    std::fill(seen.begin(), seen.end(), 0);
    size_t done = 0;
    while (done < n) {
      const size_t room = 1 + rng() % kCapacity;
      const size_t min_complete = rng() % (reader.in_flight() + 1);
      const size_t got = reader.harvest(std::span<ReadCompletion>(out.data(), room), min_complete);
      REQUIRE(got >= std::min(min_complete, room));
      for (size_t k = 0; k < got; ++k) {
        const ReadCompletion& c = out[k];
        REQUIRE((c.tag >> 32) == static_cast<uint64_t>(round));
        const size_t i = c.tag & 0xffffffffu;
        REQUIRE(i < n);
        const ReadRequest& r = batch[i];
        ++seen[i];
        CHECK(c.offset == r.offset);
        CHECK(c.length == r.length);
        REQUIRE_MESSAGE(c.result == static_cast<int64_t>(r.wanted), describe_failure(file.path(), c));
        CHECK(std::memcmp(r.dst, contents.data() + r.offset, r.wanted) == 0);
      }
      done += got;
      CHECK(reader.in_flight() == n - done);
    }
    for (size_t i = 0; i < n; ++i) CHECK(seen[i] == 1);
    completions += done;
  }
  CHECK(reader.in_flight() == 0);
  CHECK(completions > kCapacity * 4);
}

bool backend_available(Backend b, const char* test) {
  return b == Backend::Pread || ember::io_test::uring_available(test);
}

}  // namespace

TEST_CASE("BatchReader: random batches match the file, both backends, direct and buffered, with and without arena") {
  // Not a multiple of 4096: the last block is partial, as in real packs.
  const std::string contents = ember::io_test::random_bytes((1 << 20) + 1234, 42);
  TestFile tmp(ember::io_test::disk_dir(), contents);
  AlignedBuffer arena(kCapacity * kSlotBytes);
  uint32_t seed = 1;
  for (Backend backend : {Backend::Uring, Backend::Pread}) {
    if (!backend_available(backend, "random batches")) continue;
    for (DirectMode mode : {DirectMode::PreferDirect, DirectMode::Buffered}) {
      const DirectFile file = DirectFile::open(tmp.path(), mode);
      for (bool registered : {false, true}) {
        CAPTURE(name(backend));
        CAPTURE(file.is_direct());
        CAPTURE(registered);
        auto reader = make_reader(backend, file);
        CHECK(reader->backend_name() == name(backend));
        CHECK(reader->capacity() == kCapacity);
        if (registered) reader->register_arena(arena.data(), arena.size());
        check_random_batches(*reader, file, contents, arena.data(), seed++);
        if (backend == Backend::Uring) {
          auto& uring = static_cast<UringReader&>(*reader);
          CHECK(uring.file_registered());
          CHECK(uring.queue_depth() == kQueueDepth);
          CHECK((uring.fixed_reads() > 0) == registered);
        }
      }
      if (backend == Backend::Uring) {
        std::printf("batch_reader: io_uring on %s file: ok\n", file.is_direct() ? "an O_DIRECT" : "a buffered");
      }
    }
  }
}

TEST_CASE("BatchReader: the end of the file") {
  const std::string contents = ember::io_test::random_bytes(3 * 4096 + 100, 3);
  TestFile tmp(ember::io_test::disk_dir(), contents);
  AlignedBuffer buf(4 * 4096);
  for (Backend backend : {Backend::Uring, Backend::Pread}) {
    if (!backend_available(backend, "end of file")) continue;
    CAPTURE(name(backend));
    const DirectFile file = DirectFile::open(tmp.path());
    auto reader = make_reader(backend, file);
    uint8_t* d = buf.data();
    const ReadRequest batch[] = {
        {.offset = 3 * 4096, .length = 4096, .wanted = 100, .dst = d, .tag = 1},             // short, covers wanted
        {.offset = 3 * 4096, .length = 4096, .wanted = 0, .dst = d + 4096, .tag = 2},        // wants the whole block
        {.offset = 4 * 4096, .length = 4096, .wanted = 1, .dst = d + 2 * 4096, .tag = 3},    // wholly past the end
        {.offset = 2 * 4096, .length = 2 * 4096, .wanted = 4196, .dst = d + 2 * 4096, .tag = 4},  // spans the end
    };
    reader->submit(batch);
    ReadCompletion out[4];
    REQUIRE(reader->harvest(out, 4) == 4);
    for (const ReadCompletion& c : out) {
      CAPTURE(c.tag);
      if (c.tag == 1 || c.tag == 4) {
        CHECK(c.result == (c.tag == 1 ? 100 : 4196));
      } else {
        CHECK(c.result == -ENODATA);
        const std::string msg = describe_failure(file.path(), c);
        CHECK(msg.find(file.path() + ": read [" + std::to_string(c.offset) + ", +4096) failed: the file ends before the wanted bytes") == 0);
      }
    }
    CHECK(std::memcmp(d, contents.data() + 3 * 4096, 100) == 0);
  }
}

TEST_CASE("BatchReader: bad batches are refused whole and leave the reader usable") {
  const std::string contents = ember::io_test::random_bytes(8 * 4096, 5);
  TestFile tmp(ember::io_test::disk_dir(), contents);
  AlignedBuffer buf(kCapacity * 4096 + 4096);
  for (Backend backend : {Backend::Uring, Backend::Pread}) {
    if (!backend_available(backend, "bad batches")) continue;
    CAPTURE(name(backend));
    const DirectFile file = DirectFile::open(tmp.path());
    auto reader = make_reader(backend, file);
    const auto message_of = [&](std::span<const ReadRequest> batch) -> std::string {
      try {
        reader->submit(batch);
      } catch (const std::invalid_argument& e) {
        return e.what();
      }
      return "";
    };
    const ReadRequest good{.offset = 0, .length = 4096, .dst = buf.data(), .tag = 9};
    ReadRequest zero = good, null_dst = good, too_many_wanted = good;
    zero.length = 0;
    null_dst.dst = nullptr;
    too_many_wanted.wanted = 4097;
    CHECK(message_of(std::vector{good, zero}).find("read request 1 [0, +0): zero length") == 0);
    CHECK(message_of(std::vector{null_dst}).find("null destination") != std::string::npos);
    CHECK(message_of(std::vector{too_many_wanted}).find("wanted bytes exceed the length") != std::string::npos);
    if (file.is_direct()) {
      ReadRequest odd = good;
      odd.dst = buf.data() + 100;
      CHECK(message_of(std::vector{good, odd}).find("not " + std::to_string(file.alignment()) + "-aligned") !=
            std::string::npos);
      odd = good;
      odd.offset = 100;
      CHECK(message_of(std::vector{odd}).find("read request 0 [100, +4096)") == 0);
    }
    std::vector<ReadRequest> too_many(kCapacity + 1, good);
    CHECK(message_of(too_many).find("exceeds the 96 free slots") != std::string::npos);
    CHECK(reader->in_flight() == 0);

    // harvest(out, 0) never waits; the reader still works after the refusals.
    ReadCompletion out[4];
    CHECK(reader->harvest(out, 0) == 0);
    reader->submit(std::vector{good});
    CHECK(reader->harvest(out, 1) == 1);
    CHECK(out[0].tag == 9);
    CHECK(out[0].result == 4096);
    CHECK(std::memcmp(buf.data(), contents.data(), 4096) == 0);
    CHECK(reader->harvest(out, 3) == 0);  // nothing in flight: returns at once
  }
}

TEST_CASE("BatchReader: destroying a reader with reads in flight is safe") {
  const std::string contents = ember::io_test::random_bytes(64 * 4096, 6);
  TestFile tmp(ember::io_test::disk_dir(), contents);
  AlignedBuffer buf(64 * 4096);
  for (Backend backend : {Backend::Uring, Backend::Pread}) {
    if (!backend_available(backend, "destroy in flight")) continue;
    const DirectFile file = DirectFile::open(tmp.path());
    std::vector<ReadRequest> batch;
    for (uint32_t i = 0; i < 64; ++i) batch.push_back({.offset = i * 4096ull, .length = 4096, .dst = buf.data() + i * 4096, .tag = i});
    std::memset(buf.data(), 0xAB, 64 * 4096);
    auto reader = make_reader(backend, file);
    reader->submit(batch);
    reader.reset();  // must wait for (or drop) the reads before the buffer goes
    // Nothing lands after the reader is gone, and what landed before is whole: each block holds
    // either its file contents or the fill pattern.
    const std::string after_reset(reinterpret_cast<const char*>(buf.data()), 64 * 4096);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(std::memcmp(buf.data(), after_reset.data(), after_reset.size()) == 0);
    const std::string fill(4096, static_cast<char>(0xAB));
    for (size_t i = 0; i < 64; ++i) {
      const std::string_view block(after_reset.data() + i * 4096, 4096);
      CHECK((block == std::string_view(contents).substr(i * 4096, 4096) || block == fill));
    }
  }
}

TEST_CASE("BatchReader: construction limits are checked with clear messages") {
  TestFile tmp(ember::io_test::disk_dir(), "abc");
  const DirectFile file = DirectFile::open(tmp.path());
  CHECK_THROWS_AS(PreadPoolReader(file, PreadPoolOptions{.threads = 0}), std::invalid_argument);
  CHECK_THROWS_AS(PreadPoolReader(file, PreadPoolOptions{.capacity = 0}), std::invalid_argument);
  if (!ember::io_test::uring_available("construction limits")) return;
  CHECK_THROWS_WITH_AS(UringReader(file, UringOptions{.capacity = 100000}),
                       "UringReader: queue depth 32 and capacity 100000 must be in [1, 32768] and [1, 65536]",
                       std::invalid_argument);
  CHECK_THROWS_AS(UringReader(file, UringOptions{.queue_depth = 0}), std::invalid_argument);
  CHECK_THROWS_AS(UringReader(file, UringOptions{.fixed_buffer_chunk = 1000}), std::invalid_argument);
  UringReader small(file, UringOptions{.queue_depth = 3, .capacity = 5});
  CHECK(small.queue_depth() == 4);  // the kernel rounds up to a power of two
  CHECK(small.capacity() == 5);
}
