#pragma once
// Which BatchReader to use (`--io-backend auto|uring|pread`) and the factory that makes it. auto
// probes io_uring and falls back to the pread pool, saying why; asking for uring where it does not
// work is an error rather than a silent fallback, so a benchmark never measures the wrong backend.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "io/batch_reader.h"

namespace ember::io {

class DirectFile;

enum class IoBackend { Auto, Uring, Pread };

const char* io_backend_name(IoBackend backend);  // "auto", "uring", "pread"
// "auto", "uring" (or "io_uring"), "pread" -> backend; false for anything else.
bool parse_io_backend(std::string_view name, IoBackend* backend);

struct ReaderOptions {
  uint32_t queue_depth = 32;   // io_uring submission queue entries
  uint32_t capacity = 256;     // most requests in flight
  // Threads of the pread pool: storage needs many reads in flight to reach its throughput (phone UFS
  // and NVMe queues are 32 deep; this project's test VM gives 1.5-3x the random-read IOPS with 16
  // synchronous readers than with 4). Each thread sleeps in pread: a stack, no CPU.
  uint32_t pread_threads = 16;
  // How auto and uring find out whether io_uring works: null means UringReader::unavailable_reason.
  // Replaceable so that tests can play a system that blocks io_uring.
  std::string (*uring_probe)() = nullptr;
};

struct ReaderChoice {
  std::unique_ptr<BatchReader> reader;
  // Empty, or one line for the caller to log: why auto did not get io_uring.
  std::string fallback_reason;
};

// `file` must outlive the reader. Throws IoError when `uring` is asked for and io_uring does not
// work here (the message says why and suggests --io-backend pread).
ReaderChoice make_batch_reader(IoBackend backend, const DirectFile& file, const ReaderOptions& options = {});

}  // namespace ember::io
