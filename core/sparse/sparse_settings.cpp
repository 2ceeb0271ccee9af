#include "core/sparse/sparse_settings.h"

#include <cmath>
#include <string>

namespace ember {

std::string sparse_mode_names() {
  std::string out;
  for (SparseOptions::Mode m : {SparseOptions::Mode::Dense, SparseOptions::Mode::Oracle, SparseOptions::Mode::Predictor,
                                SparseOptions::Mode::Threshold}) {
    if (!out.empty()) out += ", ";
    out += sparse_mode_name(m);
  }
  return out;
}

SparseOptions resolve_sparse_settings(const SparseSettings& s, const SparseSettingNames& names) {
  SparseOptions o;
  if (!parse_sparse_mode(s.mode.c_str(), &o.mode))
    throw SparseSettingsError(names.mode, "unknown mode \"" + s.mode + "\" (one of " + sparse_mode_names() + ")");
  if (std::isinf(s.threshold)) throw SparseSettingsError(names.threshold, "must be a finite number");
  const bool has_sparsity = s.sparsity >= 0.0;
  if (has_sparsity) {
    if (!(s.sparsity <= kMaxTargetSparsity))
      throw SparseSettingsError(names.sparsity, "must be from 0 to 0.99, got " + std::to_string(s.sparsity));
    if (o.mode != SparseOptions::Mode::Dense && o.mode != SparseOptions::Mode::Threshold) {
      throw SparseSettingsError(names.sparsity, std::string("is a threshold-mode setting; it cannot go with ") +
                                                    names.mode + " " + s.mode);
    }
    o.mode = SparseOptions::Mode::Threshold;
    o.target_sparsity = static_cast<float>(s.sparsity);
  }
  if (s.profile) {
    if (!has_sparsity) {
      throw SparseSettingsError(names.profile,
                                std::string("calibrates the threshold mode to a target sparsity: give ") +
                                    names.sparsity + " too");
    }
    if (!std::isnan(s.threshold)) {
      throw SparseSettingsError(names.profile,
                                std::string("sets every layer's threshold; it cannot go with ") + names.threshold);
    }
  }
  o.threshold_override = static_cast<float>(s.threshold);
  o.diagnostics = s.diagnostics;
  return o;
}

}  // namespace ember
