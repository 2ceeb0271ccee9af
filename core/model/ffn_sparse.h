#pragma once
// The sparse FFN of decode steps with every weight in memory: a selector (oracle, predictor or
// threshold: ffn_selectors.h) lists token 0's active neurons, and the gather kernel
// (core/sparse/sparse_ffn.h) computes only those. When the list holds every neuron, the dense
// kernels run instead, so the result is the dense FFN's bit for bit.
#include <memory>
#include <vector>

#include "core/model/ffn_dense.h"
#include "core/model/ffn_selectors.h"
#include "core/sparse/sparse_ffn.h"

namespace ember {

class SparseFfn : public FfnStrategy {
 public:
  // dense: the full-list fallback (not owned; outlives this). A model without ffn_down_t builds
  // its transposed down copy here (once per model).
  SparseFfn(const FfnEnv& env, std::unique_ptr<ActiveSelector> selector, DenseFfn& dense);
  void run(int64_t layer, const FfnIo& io, FfnStepReport& report) override;  // one token
  uint64_t scratch_bytes() const override;

 private:
  FfnEnv env_;
  std::unique_ptr<ActiveSelector> selector_;
  DenseFfn& dense_;
  std::vector<MatrixView> down_rows_;  // (n_layer) one row per neuron
  std::vector<int32_t> active_;        // (n_ff)
  SparseFfnScratch scratch_;
};

}  // namespace ember
