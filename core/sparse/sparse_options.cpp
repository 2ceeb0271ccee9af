#include "core/sparse/sparse_options.h"

#include <cstring>

namespace ember {

const char* sparse_mode_name(SparseOptions::Mode mode) {
  switch (mode) {
    case SparseOptions::Mode::Dense: return "dense";
    case SparseOptions::Mode::Oracle: return "oracle";
    case SparseOptions::Mode::Predictor: return "predictor";
    case SparseOptions::Mode::Threshold: return "threshold";
  }
  return "?";
}

bool parse_sparse_mode(const char* name, SparseOptions::Mode* mode) {
  static constexpr SparseOptions::Mode kAll[] = {SparseOptions::Mode::Dense, SparseOptions::Mode::Oracle,
                                                 SparseOptions::Mode::Predictor, SparseOptions::Mode::Threshold};
  for (SparseOptions::Mode m : kAll) {
    if (std::strcmp(name, sparse_mode_name(m)) == 0) {
      *mode = m;
      return true;
    }
  }
  return false;
}

}  // namespace ember
