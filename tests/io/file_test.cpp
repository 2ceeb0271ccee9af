// io::ReadOnlyFile, MappedRegion and AlignedBuffer on temporary files.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>

#include "io/file.h"

using ember::io::AlignedBuffer;
using ember::io::IoError;
using ember::io::MappedRegion;
using ember::io::ReadOnlyFile;

namespace {

// A temporary file with the given contents, removed on destruction.
class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    std::string pattern = (std::filesystem::temp_directory_path() / "ember_io_test_XXXXXX").string();
    const int fd = ::mkstemp(pattern.data());
    REQUIRE(fd >= 0);
    path_ = pattern;
    REQUIRE(::write(fd, contents.data(), contents.size()) == static_cast<ssize_t>(contents.size()));
    ::close(fd);
  }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string numbered_bytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 31 + i / 256);
  return s;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("ReadOnlyFile: size and exact reads anywhere inside the file") {
  const std::string contents = numbered_bytes(100000);
  TempFile tmp(contents);
  const ReadOnlyFile f = ReadOnlyFile::open(tmp.path());
  CHECK(f.size() == contents.size());
  CHECK(f.path() == tmp.path());
  std::string got(1000, '\0');
  f.read_exact(got.data(), got.size(), 4095);
  CHECK(got == contents.substr(4095, 1000));
  f.read_exact(got.data(), 1, contents.size() - 1);
  CHECK(got[0] == contents.back());
  f.read_exact(nullptr, 0, contents.size());  // an empty read at the end is inside the file
  std::string all(contents.size(), '\0');
  f.read_exact(all.data(), all.size(), 0);
  CHECK(all == contents);
}

TEST_CASE("ReadOnlyFile: reads outside the file are refused, without wrapping") {
  TempFile tmp(numbered_bytes(64));
  const ReadOnlyFile f = ReadOnlyFile::open(tmp.path());
  char buf[8];
  CHECK(contains(error_of([&] { f.read_exact(buf, 8, 57); }), "is outside the file of 64 bytes"));
  CHECK(contains(error_of([&] { f.read_exact(buf, 1, 65); }), "outside the file"));
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  CHECK(contains(error_of([&] { f.read_exact(buf, 8, max - 2); }), "outside the file"));
  CHECK(contains(error_of([&] { f.read_exact(buf, max, 8); }), "outside the file"));
  CHECK(contains(error_of([&] { f.read_exact(buf, 8, 57); }), tmp.path().c_str()));
}

TEST_CASE("ReadOnlyFile: open errors name the path") {
  CHECK(contains(error_of([] { ReadOnlyFile::open("/nonexistent/ember/file"); }), "/nonexistent/ember/file: cannot open"));
  CHECK(contains(error_of([] { ReadOnlyFile::open(std::filesystem::temp_directory_path().string()); }),
                 "not a regular file"));
}

TEST_CASE("ReadOnlyFile: moves keep one owner of the descriptor") {
  TempFile tmp("abc");
  ReadOnlyFile a = ReadOnlyFile::open(tmp.path());
  ReadOnlyFile b = std::move(a);
  CHECK(a.fd() == -1);
  CHECK(b.size() == 3);
  char c;
  b.read_exact(&c, 1, 2);
  CHECK(c == 'c');
  ReadOnlyFile d = ReadOnlyFile::open(tmp.path());
  d = std::move(b);
  CHECK(d.size() == 3);
}

TEST_CASE("MappedRegion: maps unaligned ranges and matches the file") {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const std::string contents = numbered_bytes(3 * page + 123);
  TempFile tmp(contents);
  const ReadOnlyFile f = ReadOnlyFile::open(tmp.path());
  for (uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{page - 1}, uint64_t{page}, uint64_t{2 * page + 7}}) {
    INFO("offset ", offset);
    const uint64_t length = contents.size() - offset;
    const MappedRegion m = MappedRegion::map(f, offset, length);
    REQUIRE(m.size() == length);
    CHECK(std::memcmp(m.data(), contents.data() + offset, length) == 0);
  }
  const MappedRegion empty = MappedRegion::map(f, 5, 0);
  CHECK(empty.size() == 0);
  CHECK(contains(error_of([&] { MappedRegion::map(f, 1, contents.size()); }), "outside the file"));
  CHECK(contains(error_of([&] { MappedRegion::map(f, std::numeric_limits<uint64_t>::max(), 2); }), "outside the file"));

  MappedRegion moved = MappedRegion::map(f, 10, 20);
  MappedRegion target = std::move(moved);
  CHECK(moved.data() == nullptr);
  CHECK(std::memcmp(target.data(), contents.data() + 10, 20) == 0);
  target = MappedRegion::map(f, 0, 4);
  CHECK(std::memcmp(target.data(), contents.data(), 4) == 0);
}

TEST_CASE("AlignedBuffer: aligned, zero-filled, any size") {
  for (size_t alignment : {size_t{64}, size_t{4096}}) {
    for (size_t bytes : {size_t{1}, size_t{4095}, size_t{4096}, size_t{10000}}) {
      AlignedBuffer b(bytes, alignment);
      REQUIRE(b.size() == bytes);
      CHECK(reinterpret_cast<uintptr_t>(b.data()) % alignment == 0);
      bool zero = true;
      for (size_t i = 0; i < bytes; ++i) zero = zero && b.data()[i] == 0;
      CHECK(zero);
    }
  }
  AlignedBuffer empty(0);
  CHECK(empty.size() == 0);
  CHECK(AlignedBuffer().data() == nullptr);
  CHECK_THROWS_AS(AlignedBuffer(16, 48), std::invalid_argument);
}

TEST_CASE("AlignedBuffer: large buffers are 2 MiB-aligned huge-page-advised mappings, zero-filled, movable") {
  const size_t bytes = AlignedBuffer::kHugePageBytes * 2 + 12345;  // not a whole number of pages
  AlignedBuffer b(bytes, 64);
  REQUIRE(b.size() == bytes);
  CHECK(b.huge_page_advised());
  CHECK(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer::kHugePageBytes == 0);
  bool zero = true;
  for (size_t i = 0; i < bytes; i += 4093) zero = zero && b.data()[i] == 0;
  CHECK(zero);
  CHECK(b.data()[bytes - 1] == 0);
  b.data()[bytes - 1] = 7;  // the whole length is writable
  AlignedBuffer moved = std::move(b);
  CHECK(moved.huge_page_advised());
  CHECK(moved.data()[bytes - 1] == 7);
  moved = AlignedBuffer(100);  // unmaps the large one, takes a small one
  CHECK_FALSE(moved.huge_page_advised());
  CHECK_FALSE(AlignedBuffer(AlignedBuffer::kHugePageBytes - 1).huge_page_advised());
}

TEST_CASE("AlignedBuffer + read_exact: an O_DIRECT-style aligned read") {
  const std::string contents = numbered_bytes(8192);
  TempFile tmp(contents);
  const ReadOnlyFile f = ReadOnlyFile::open(tmp.path());
  AlignedBuffer buf(4096);
  f.read_exact(buf.data(), 4096, 4096);
  CHECK(std::memcmp(buf.data(), contents.data() + 4096, 4096) == 0);
}
