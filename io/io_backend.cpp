#include "io/io_backend.h"

#include "io/direct_file.h"
#include "io/file.h"
#include "io/pread_pool_reader.h"
#include "io/uring_reader.h"

namespace ember::io {

const char* io_backend_name(IoBackend backend) {
  switch (backend) {
    case IoBackend::Auto: return "auto";
    case IoBackend::Uring: return "uring";
    case IoBackend::Pread: return "pread";
  }
  return "?";
}

bool parse_io_backend(std::string_view name, IoBackend* backend) {
  if (name == "auto") *backend = IoBackend::Auto;
  else if (name == "uring" || name == "io_uring") *backend = IoBackend::Uring;
  else if (name == "pread") *backend = IoBackend::Pread;
  else return false;
  return true;
}

ReaderChoice make_batch_reader(IoBackend backend, const DirectFile& file, const ReaderOptions& options) {
  ReaderChoice choice;
  if (backend != IoBackend::Pread) {
    const std::string reason = options.uring_probe ? options.uring_probe() : UringReader::unavailable_reason();
    if (reason.empty()) {
      choice.reader = std::make_unique<UringReader>(
          file, UringOptions{.queue_depth = options.queue_depth, .capacity = options.capacity});
      return choice;
    }
    if (backend == IoBackend::Uring) {
      throw IoError("--io-backend uring: io_uring is unavailable here: " + reason +
                    "; use --io-backend pread (or auto)");
    }
    choice.fallback_reason = "io_uring is unavailable (" + reason + "); reading with a pool of " +
                             std::to_string(options.pread_threads) + " pread threads";
  }
  choice.reader = std::make_unique<PreadPoolReader>(
      file, PreadPoolOptions{.threads = options.pread_threads, .capacity = options.capacity});
  return choice;
}

}  // namespace ember::io
