// io::parse_io_backend and make_batch_reader: auto falls back with a reason, uring refuses to.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "io/direct_file.h"
#include "io/file.h"
#include "io/io_backend.h"
#include "io/uring_reader.h"
#include "tests/io/io_test_files.h"

using namespace ember::io;
using ember::io_test::TestFile;

namespace {

std::string blocked_probe() { return "io_uring_queue_init: Operation not permitted (EPERM: blocked by a seccomp policy)"; }
std::string working_probe() { return ""; }

}  // namespace

TEST_CASE("parse_io_backend: the --io-backend values") {
  IoBackend b = IoBackend::Pread;
  CHECK(parse_io_backend("auto", &b));
  CHECK(b == IoBackend::Auto);
  CHECK(parse_io_backend("uring", &b));
  CHECK(b == IoBackend::Uring);
  CHECK(parse_io_backend("io_uring", &b));
  CHECK(b == IoBackend::Uring);
  CHECK(parse_io_backend("pread", &b));
  CHECK(b == IoBackend::Pread);
  CHECK_FALSE(parse_io_backend("", &b));
  CHECK_FALSE(parse_io_backend("URING", &b));
  CHECK_FALSE(parse_io_backend("aio", &b));
  CHECK(b == IoBackend::Pread);  // untouched on failure
  for (IoBackend x : {IoBackend::Auto, IoBackend::Uring, IoBackend::Pread}) {
    IoBackend back{};
    CHECK(parse_io_backend(io_backend_name(x), &back));
    CHECK(back == x);
  }
}

TEST_CASE("make_batch_reader: pread, auto and uring, with io_uring working and blocked") {
  TestFile tmp(ember::io_test::disk_dir(), ember::io_test::random_bytes(8192, 1));
  const DirectFile file = DirectFile::open(tmp.path());

  ReaderChoice pread = make_batch_reader(IoBackend::Pread, file, {.capacity = 8, .pread_threads = 2});
  CHECK(pread.reader->backend_name() == "pread");
  CHECK(pread.reader->queue_depth() == 2);
  CHECK(pread.fallback_reason.empty());

  // A system that blocks io_uring: auto falls back and says why; uring is an error.
  ReaderChoice fallback = make_batch_reader(IoBackend::Auto, file, {.uring_probe = &blocked_probe});
  CHECK(fallback.reader->backend_name() == "pread");
  CHECK(fallback.fallback_reason ==
        "io_uring is unavailable (io_uring_queue_init: Operation not permitted (EPERM: blocked by a seccomp policy)); "
        "reading with a pool of 16 pread threads");
  try {
    make_batch_reader(IoBackend::Uring, file, {.uring_probe = &blocked_probe});
    FAIL("expected an IoError");
  } catch (const IoError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("--io-backend uring: io_uring is unavailable here: io_uring_queue_init: Operation not permitted") == 0);
    CHECK(msg.find("use --io-backend pread") != std::string::npos);
  }

  // The real probe: whatever this machine says.
  const std::string reason = UringReader::unavailable_reason();
  ReaderChoice real = make_batch_reader(IoBackend::Auto, file);
  std::printf("io_backend: auto picked %s%s%s\n", real.reader->backend_name().c_str(),
              real.fallback_reason.empty() ? "" : ": ", real.fallback_reason.c_str());
  if (reason.empty()) {
    CHECK(real.reader->backend_name() == "io_uring");
    CHECK(real.fallback_reason.empty());
    ReaderChoice uring = make_batch_reader(IoBackend::Uring, file, {.queue_depth = 16, .uring_probe = &working_probe});
    CHECK(uring.reader->backend_name() == "io_uring");
    CHECK(uring.reader->queue_depth() == 16);
  } else {
    ember::io_test::uring_available("make_batch_reader uring");
    CHECK(real.reader->backend_name() == "pread");
    CHECK(real.fallback_reason.find(reason) != std::string::npos);
  }
}
