// io::advance_read: the short-read policy of both backends, step by step (the kernel rarely
// produces these cases on demand).
#include <doctest/doctest.h>

#include <cerrno>

#include "io/read_progress.h"

using namespace ember::io;

TEST_CASE("advance_read: complete, partial then complete, and errors") {
  const ReadRequest r{.offset = 8192, .length = 8192, .wanted = 0};
  int64_t result = 0;
  {
    ReadProgress p;
    CHECK(advance_read(r, p, 8192, 1 << 20, &result) == ReadStep::Done);
    CHECK(result == 8192);
  }
  {
    // A partial transfer before the end of the file: read the rest, then done.
    ReadProgress p;
    CHECK(advance_read(r, p, 4096, 1 << 20, &result) == ReadStep::Retry);
    CHECK(p.done == 4096);
    CHECK(advance_read(r, p, 4096, 1 << 20, &result) == ReadStep::Done);
    CHECK(result == 8192);
  }
  {
    ReadProgress p;
    CHECK(advance_read(r, p, -EIO, 1 << 20, &result) == ReadStep::Failed);
    CHECK(result == -EIO);
  }
}

TEST_CASE("advance_read: the end of the file decides by the wanted bytes") {
  int64_t result = 0;
  const uint64_t size = 8192 + 100;
  {
    ReadProgress p;  // the last partial block, wanting only what exists
    const ReadRequest r{.offset = 8192, .length = 4096, .wanted = 100};
    CHECK(advance_read(r, p, 100, size, &result) == ReadStep::Done);
    CHECK(result == 100);
  }
  {
    ReadProgress p;  // wanting the whole block of a file that ends inside it
    const ReadRequest r{.offset = 8192, .length = 4096};
    CHECK(advance_read(r, p, 100, size, &result) == ReadStep::Failed);
    CHECK(result == -ENODATA);
  }
  {
    ReadProgress p;  // 0 bytes: the file ended (shrank) before the offset
    const ReadRequest r{.offset = 4096, .length = 4096};
    CHECK(advance_read(r, p, 0, 1 << 20, &result) == ReadStep::Failed);
    CHECK(result == -ENODATA);
  }
  {
    ReadProgress p;  // partial, then 0 bytes with the wanted prefix in: fine
    const ReadRequest r{.offset = 0, .length = 8192, .wanted = 4096};
    CHECK(advance_read(r, p, 4096, 1 << 20, &result) == ReadStep::Retry);
    CHECK(advance_read(r, p, 0, 1 << 20, &result) == ReadStep::Done);
    CHECK(result == 4096);
  }
}

TEST_CASE("advance_read: EINTR and EAGAIN are retried a bounded number of times") {
  const ReadRequest r{.offset = 0, .length = 4096};
  int64_t result = 0;
  ReadProgress p;
  for (int i = 0; i < 64; ++i) REQUIRE(advance_read(r, p, i % 2 ? -EINTR : -EAGAIN, 1 << 20, &result) == ReadStep::Retry);
  CHECK(advance_read(r, p, -EINTR, 1 << 20, &result) == ReadStep::Failed);
  CHECK(result == -EINTR);

  ReadProgress q;  // progress resets the count
  for (int i = 0; i < 60; ++i) REQUIRE(advance_read(r, q, -EINTR, 1 << 20, &result) == ReadStep::Retry);
  CHECK(advance_read(r, q, 512, 1 << 20, &result) == ReadStep::Retry);
  CHECK(q.stalls == 0);
  for (int i = 0; i < 60; ++i) REQUIRE(advance_read(r, q, -EINTR, 1 << 20, &result) == ReadStep::Retry);
  CHECK(advance_read(r, q, 4096 - 512, 1 << 20, &result) == ReadStep::Done);
}
