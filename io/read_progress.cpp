#include "io/read_progress.h"

#include <cerrno>

namespace ember::io {

ReadStep advance_read(const ReadRequest& request, ReadProgress& progress, int64_t got, uint64_t file_size,
                      int64_t* result) {
  // EINTR/EAGAIN are transient; a bounded number of them keeps a stuck device from spinning us.
  constexpr uint32_t kMaxStalls = 64;
  if (got < 0) {
    if ((got == -EINTR || got == -EAGAIN) && ++progress.stalls <= kMaxStalls) return ReadStep::Retry;
    *result = got;
    return ReadStep::Failed;
  }
  progress.stalls = 0;
  progress.done += static_cast<uint32_t>(got);  // got <= length - done: the kernel never overfills
  if (progress.done >= request.length) {
    *result = progress.done;
    return ReadStep::Done;
  }
  // Short. At the end of the file this is all there is: fine when the wanted bytes are in (the
  // last aligned block of a file), -ENODATA when not. Before the end it is a partial transfer:
  // read the rest. Checking against the size as well as got == 0 matters for O_DIRECT, where a
  // retry from the unaligned end of file would fail with EINVAL instead of returning 0.
  if (got == 0 || request.offset + progress.done >= file_size) {
    if (progress.done >= wanted_bytes(request)) {
      *result = progress.done;
      return ReadStep::Done;
    }
    *result = -ENODATA;
    return ReadStep::Failed;
  }
  return ReadStep::Retry;
}

}  // namespace ember::io
