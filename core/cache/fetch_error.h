#pragma once
// The error of a failed bundle fetch or hot-prefix load: an I/O error or a truncated pack
// (the message names the file, the offset and the length), or a cache too small for one step's
// active set. The cache is consistent when it is thrown, and the next fetch works: the caller (the
// engine job) fails the request and keeps serving.
#include <stdexcept>

namespace ember::cache {

class FetchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ember::cache
