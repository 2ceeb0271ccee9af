#pragma once
// The user-facing sparse-FFN settings (a mode name, a threshold, a target sparsity, whether a
// profile of per-layer thresholds will be applied) and the rules that combine them into
// SparseOptions. Shared by the command-line tools (tools/model_options: --sparse, --sparsity, ...)
// and the daemon's configuration (server/serve_config: sparse.mode, sparse.sparsity, ...), so both
// accept and refuse exactly the same combinations; only the names in the messages differ.
#include <limits>
#include <stdexcept>
#include <string>

#include "core/sparse/sparse_options.h"

namespace ember {

struct SparseSettings {
  std::string mode = "dense";
  double threshold = std::numeric_limits<double>::quiet_NaN();  // NaN: not given
  double sparsity = -1.0;                                        // < 0: not given
  bool diagnostics = false;
  bool profile = false;  // per-layer thresholds from a profile will be applied (they need the model)
};

// What each setting is called where it came from ("--sparsity" or "sparse.sparsity"), for messages.
struct SparseSettingNames {
  const char* mode;
  const char* threshold;
  const char* sparsity;
  const char* profile;
};

// Names the offending setting separately, so a caller can raise its own error type.
struct SparseSettingsError : std::invalid_argument {
  SparseSettingsError(std::string setting_name, const std::string& message)
      : std::invalid_argument(message), setting(std::move(setting_name)) {}
  std::string setting;
};

// The largest target sparsity accepted: skipping every neuron is not a model any more.
inline constexpr double kMaxTargetSparsity = 0.99;

// "dense, oracle, predictor, threshold": for messages.
std::string sparse_mode_names();

// The options the settings ask for, without the profile's thresholds (the caller applies them
// with the model at hand). A given sparsity implies the threshold mode. Throws SparseSettingsError
// for an unknown mode, a sparsity outside [0, kMaxTargetSparsity], a threshold that is not finite,
// a sparsity with a mode other than dense/threshold, and a profile without a sparsity or with a
// threshold.
SparseOptions resolve_sparse_settings(const SparseSettings& settings, const SparseSettingNames& names);

}  // namespace ember
