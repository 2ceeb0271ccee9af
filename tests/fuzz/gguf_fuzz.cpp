// libFuzzer target for the GGUF reader: any input must either open or throw GgufError / IoError;
// a crash, hang, sanitizer report or other exception is a bug. Built by CMake with -DEMBER_FUZZ=ON (as
// fuzz_gguf; clang only); run by tests/fuzz/run.sh on the seeds tests/fuzz/seeds/make_gguf_seeds.py writes.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader takes a path: give it an in-memory file under /proc/self/fd.
  const int fd = ::memfd_create("gguf_fuzz", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (done == size) {
    try {
      const auto file = ember::gguf::GgufFile::open("/proc/self/fd/" + std::to_string(fd));
      for (const auto& t : file.tensors()) {  // every accepted tensor must be readable and mappable
        std::vector<uint8_t> bytes(t.n_bytes);
        file.read_tensor(t, bytes.data());
        const auto mapped = file.map_tensor(t);
        if (mapped.size() != t.n_bytes) __builtin_trap();
      }
    } catch (const ember::gguf::GgufError&) {
    } catch (const ember::io::IoError&) {
    }
  }
  ::close(fd);
  return 0;
}
