#include "core/grammar/grammar_stage.h"

#include <string>

namespace ember::grammar {

void GrammarStage::apply(CandidateSet& candidates) {
  drawn_pending_ = true;
  // Few candidates (after another filter): checking each token's bytes is cheaper than a mask.
  const bool per_token = candidates.size * 8 < static_cast<size_t>(matcher_->trie().n_vocab());
  std::span<const uint64_t> bits;
  if (!per_token) bits = matcher_->allowed_bits();
  size_t kept = 0;
  for (size_t i = 0; i < candidates.size; ++i) {
    const int32_t id = candidates.data[i].id;
    const bool ok = per_token ? matcher_->allowed(id)
                              : id >= 0 && id < matcher_->trie().n_vocab() &&
                                    ((bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1);
    if (ok) candidates.data[kept++] = candidates.data[i];  // order kept, so `sorted` stays true
  }
  candidates.size = kept;
}

void GrammarStage::accept(int32_t token) {
  if (!drawn_pending_) return;  // a prompt token
  drawn_pending_ = false;
  if (!matcher_->accept(token)) {
    throw GrammarError("token " + std::to_string(token) + " was sampled but the grammar does not allow it");
  }
}

void GrammarStage::reset() {
  drawn_pending_ = false;
  matcher_->reset();
}

}  // namespace ember::grammar
