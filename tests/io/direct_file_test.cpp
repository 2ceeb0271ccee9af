// io::DirectFile: O_DIRECT where the file system allows it, buffered with a warning where not.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "io/direct_file.h"
#include "io/file.h"
#include "tests/io/io_test_files.h"

using ember::io::DirectFile;
using ember::io::DirectFileSyscalls;
using ember::io::DirectMode;
using ember::io::IoError;
using ember::io_test::TestFile;

namespace {

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// Reads a block through the descriptor the way the readers will: aligned buffer, aligned offset.
std::string read_block(const DirectFile& f, uint64_t offset) {
  ember::io::AlignedBuffer buf(4096);
  const ssize_t got = ::pread(f.fd(), buf.data(), 4096, static_cast<off_t>(offset));
  REQUIRE(got >= 0);
  return std::string(reinterpret_cast<const char*>(buf.data()), static_cast<size_t>(got));
}

void check_opens(const std::filesystem::path& dir, const char* label) {
  const std::string contents = ember::io_test::random_bytes(3 * 4096 + 100, 7);
  TestFile tmp(dir, contents);
  const DirectFile f = DirectFile::open(tmp.path());
  std::printf("direct_file: %s (%s): %s%s%s\n", label, dir.c_str(), f.is_direct() ? "O_DIRECT" : "buffered",
              f.warning().empty() ? "" : " - ", f.warning().c_str());
  CHECK(f.size() == contents.size());
  CHECK(f.is_direct() == f.warning().empty());
  std::printf("direct_file: %s: read alignment %zu\n", label, f.alignment());
  if (f.is_direct()) {
    CHECK(f.alignment() >= 512);
    CHECK(f.alignment() <= 4096);
    CHECK((f.alignment() & (f.alignment() - 1)) == 0);
  } else {
    CHECK(f.alignment() == 1);
  }
  CHECK(read_block(f, 4096) == contents.substr(4096, 4096));
  CHECK(read_block(f, 3 * 4096) == contents.substr(3 * 4096));  // the short last block
}

// A file system that refuses O_DIRECT at open (tmpfs before Linux 6.6).
int open_refusing_direct(const char* path, int flags) {
  if (flags & O_DIRECT) {
    errno = EINVAL;
    return -1;
  }
  return ::open(path, flags);
}
// One that accepts the flag and refuses the reads.
int open_dropping_direct(const char* path, int flags) { return ::open(path, flags & ~O_DIRECT); }
ssize_t pread_einval(int, void*, size_t, off_t) {
  errno = EINVAL;
  return -1;
}
ssize_t pread_eio(int, void*, size_t, off_t) {
  errno = EIO;
  return -1;
}
// A device reporting a DIO alignment (statx) of 512, of a useless size, or one that refuses reads
// below 4096 although it reported 512.
uint32_t dio_512(int) { return 512; }
uint32_t dio_3000(int) { return 3000; }
uint32_t dio_8192(int) { return 8192; }
uint32_t dio_256(int) { return 256; }
ssize_t pread_refusing_small(int fd, void* buf, size_t n, off_t offset) {
  if (n % 4096 != 0 || offset % 4096 != 0) {
    errno = EINVAL;
    return -1;
  }
  return ::pread(fd, buf, n, offset);
}

}  // namespace

TEST_CASE("DirectFile: a real disk and tmpfs (prints which mode each got)") {
  check_opens(ember::io_test::disk_dir(), "disk");
  check_opens(ember::io_test::shm_dir(), "tmpfs");
}

TEST_CASE("DirectFile: buffered on request, without a warning") {
  TestFile tmp(ember::io_test::disk_dir(), "hello");
  const DirectFile f = DirectFile::open(tmp.path(), DirectMode::Buffered);
  CHECK_FALSE(f.is_direct());
  CHECK(f.warning().empty());
  CHECK(f.alignment() == 1);
  CHECK(read_block(f, 0) == "hello");
}

TEST_CASE("DirectFile: open refusing O_DIRECT falls back to buffered with a warning") {
  TestFile tmp(ember::io_test::disk_dir(), "abcdef");
  const DirectFile f = DirectFile::open(tmp.path(), DirectMode::PreferDirect,
                                        DirectFileSyscalls{&open_refusing_direct, DirectFileSyscalls::real().pread});
  CHECK_FALSE(f.is_direct());
  CHECK(contains(f.warning(), tmp.path()));
  CHECK(contains(f.warning(), "refuses O_DIRECT (open: Invalid argument)"));
  CHECK(read_block(f, 0) == "abcdef");
}

TEST_CASE("DirectFile: a probe read failing with EINVAL falls back to buffered with a warning") {
  TestFile tmp(ember::io_test::disk_dir(), "abcdef");
  const DirectFile f =
      DirectFile::open(tmp.path(), DirectMode::PreferDirect, DirectFileSyscalls{&open_dropping_direct, &pread_einval});
  CHECK_FALSE(f.is_direct());
  CHECK(contains(f.warning(), "refuses O_DIRECT (probe read: Invalid argument)"));
  CHECK(read_block(f, 0) == "abcdef");
}

TEST_CASE("DirectFile: the read alignment is the kernel's when it is usable and probed, else 4096") {
  const std::string contents = ember::io_test::random_bytes(3 * 4096, 8);
  TestFile tmp(ember::io_test::disk_dir(), contents);
  const auto real = DirectFileSyscalls::real();
  const auto opened = [&](uint32_t (*dio)(int), ssize_t (*pread)(int, void*, size_t, off_t)) {
    return DirectFile::open(tmp.path(), DirectMode::PreferDirect, DirectFileSyscalls{real.open, pread, dio});
  };
  const DirectFile probe = DirectFile::open(tmp.path());
  if (!probe.is_direct()) {
    MESSAGE("SKIPPED: the scratch directory's file system refuses O_DIRECT");
    return;
  }
  // Whether 512 really works depends on the device; what is checked is the choice.
  const DirectFile reported = opened(&dio_512, real.pread);
  CHECK((reported.alignment() == 512 || reported.alignment() == 4096));
  CHECK(opened(&dio_512, &pread_refusing_small).alignment() == 4096);  // reported, then refused: 4096
  CHECK(opened(&dio_3000, real.pread).alignment() == 4096);            // not a power of two
  CHECK(opened(&dio_8192, real.pread).alignment() == 4096);            // above a page: the probe decides
  CHECK(opened(&dio_256, real.pread).alignment() == 4096);             // below a sector
  CHECK(opened(nullptr, real.pread).alignment() == 4096);              // unknown
}

TEST_CASE("DirectFile: other failures are errors naming the path") {
  const auto error_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const IoError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(contains(error_of([] { DirectFile::open("/nonexistent/ember/pack"); }), "/nonexistent/ember/pack: cannot open"));
  CHECK(contains(error_of([] { DirectFile::open("/nonexistent/ember/pack", DirectMode::Buffered); }), "cannot open"));
  TestFile tmp(ember::io_test::disk_dir(), "abc");
  CHECK(contains(error_of([&] {
                   DirectFile::open(tmp.path(), DirectMode::PreferDirect, DirectFileSyscalls{&open_dropping_direct, &pread_eio});
                 }),
                 "O_DIRECT probe read of the first block failed: Input/output error"));
  CHECK(contains(error_of([] { DirectFile::open(ember::io_test::disk_dir().string(), DirectMode::Buffered); }),
                 "not a regular file"));
}

TEST_CASE("DirectFile: moves keep one owner of the descriptor") {
  TestFile tmp(ember::io_test::disk_dir(), "abc");
  DirectFile a = DirectFile::open(tmp.path());
  const int fd = a.fd();
  DirectFile b = std::move(a);
  CHECK(b.fd() == fd);
  CHECK(a.fd() == -1);
  CHECK(b.size() == 3);
}
