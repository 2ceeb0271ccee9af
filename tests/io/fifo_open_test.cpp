// A path that is a FIFO: ReadOnlyFile::open and DirectFile::open must refuse it at once ("not a
// regular file", naming the path) instead of blocking in open() until a writer appears, which hung
// `ember run` and kept `ember serve` from acting on SIGTERM. And the files they do accept read
// normally: the O_NONBLOCK the open uses is cleared again (io_uring honours it on regular files).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "io/direct_file.h"
#include "io/file.h"
#include "tests/io/io_test_files.h"

namespace {

using ember::io::DirectFile;
using ember::io::DirectMode;
using ember::io::IoError;
using ember::io::ReadOnlyFile;

struct Fifo {
  Fifo() {
    path = (std::filesystem::temp_directory_path() / ("ember-io-fifo-" + std::to_string(::getpid()))).string();
    std::filesystem::remove(path);
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  }
  ~Fifo() { std::filesystem::remove(path); }
  std::string path;
};

// Runs `open` aside; if it is still blocked after 5 s, unblocks it by opening the FIFO for writing
// (so the test fails instead of hanging) and reports that. Otherwise the error message.
std::string open_error(const std::string& fifo, const std::function<void()>& open) {
  auto opening = std::async(std::launch::async, [&]() -> std::string {
    try {
      open();
    } catch (const IoError& e) {
      return e.what();
    }
    return "(opened)";
  });
  if (opening.wait_for(std::chrono::seconds(5)) == std::future_status::ready) return opening.get();
  // Blocked: play the writer until it lets go (it may open the FIFO more than once).
  while (opening.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (fd >= 0) ::close(fd);
  }
  return "(blocked on the FIFO)";
}

}  // namespace

TEST_CASE("opening a FIFO fails at once with 'not a regular file'") {
  Fifo fifo;
  const std::string plain = open_error(fifo.path, [&] { ReadOnlyFile::open(fifo.path); });
  CHECK(plain.find(fifo.path + ": not a regular file") != std::string::npos);
  for (DirectMode mode : {DirectMode::PreferDirect, DirectMode::Buffered}) {
    const std::string direct = open_error(fifo.path, [&] { DirectFile::open(fifo.path, mode); });
    CHECK(direct.find(fifo.path + ": not a regular file") != std::string::npos);
  }
}

TEST_CASE("files that are accepted are left blocking (no O_NONBLOCK)") {
  ember::io_test::TestFile file(std::filesystem::temp_directory_path(), ember::io_test::random_bytes(8192, 7));
  const ReadOnlyFile plain = ReadOnlyFile::open(file.path());
  CHECK((::fcntl(plain.fd(), F_GETFL) & O_NONBLOCK) == 0);
  for (DirectMode mode : {DirectMode::PreferDirect, DirectMode::Buffered}) {
    const DirectFile direct = DirectFile::open(file.path(), mode);
    CHECK((::fcntl(direct.fd(), F_GETFL) & O_NONBLOCK) == 0);
  }
}
