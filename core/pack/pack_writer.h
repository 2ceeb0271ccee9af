#pragma once
// `ember pack`: rewrites a plain model as a neuron-bundle pack (docs/pack-format.md). Streams: the
// source is memory-mapped and the output written tensor by tensor, with at most one layer's
// derived data (its F16 down copy) in memory.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/model/pack_layout.h"
#include "core/sparse/activation_profile.h"

namespace ember::pack {

struct PackOptions {
  std::string source_path;
  std::string output_path;  // written to a temporary file beside it, renamed when complete
  // Bundles hottest first by the profile (ActivationProfile::hot_order) and its frequencies
  // stored; without one, the identity order and frequencies 0. Not owned.
  const ActivationProfile* profile = nullptr;
  // Explicit orders (order[l][k] = the source neuron of bundle k of layer l), for tests and other
  // orderings; when not empty they replace the profile's order (frequencies still come from it).
  std::vector<std::vector<int32_t>> order;
  std::function<void(int64_t layers_done, int64_t n_layer)> on_layer;  // progress, may be empty
};

struct PackResult {
  int64_t n_layer = 0, n_ff = 0, n_embd = 0;
  int64_t n_expert = 0;  // a mixture of experts: n_ff bundles per expert of each layer
  BundleLayout layout;
  bool down_from_down_t = false;  // down columns copied from ffn_down_t (else F16/F32 of ffn_down)
  uint64_t file_bytes = 0;
  double seconds = 0.0;
};

// Throws std::runtime_error naming the problem: a source that does not load, is already a pack or
// mixes types per role across layers; a profile made for another model; an order that is not a
// permutation; output equal to the source; I/O errors (the partial output is removed).
PackResult write_pack(const PackOptions& options);

}  // namespace ember::pack
