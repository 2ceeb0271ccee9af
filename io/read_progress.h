#pragma once
// The short-read policy both backends share (see batch_reader.h): after each read system call for
// the remainder of a request, decide whether it is done, must be retried for the rest, or failed.
// Internal to io/.
#include <cstdint>

#include "io/batch_reader.h"

namespace ember::io {

struct ReadProgress {
  uint32_t done = 0;    // bytes delivered so far
  uint32_t stalls = 0;  // consecutive EINTR/EAGAIN answers
};

enum class ReadStep { Done, Retry, Failed };

// `got`: what the last read of [offset + done, offset + length) returned (bytes or -errno).
// Sets *result (bytes delivered or -errno) when the step is Done or Failed.
ReadStep advance_read(const ReadRequest& request, ReadProgress& progress, int64_t got, uint64_t file_size,
                      int64_t* result);

}  // namespace ember::io
