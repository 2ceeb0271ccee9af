#pragma once
// The grammar as a sampler stage: drops every candidate the grammar forbids, so the rest of the
// chain (top-k, top-p, temperature, the draw) only ever sees allowed tokens. It must come first
// in the chain, as in llama.cpp: top-k before the grammar could leave no allowed candidate.
//
// Sampler::accept() is called for prompt tokens too (for the penalties), and those must not move
// the grammar. So the stage advances its matcher only on the first accept() after an apply(), i.e.
// on the token drawn from the set it filtered; accepts before the first apply() (the prompt) are
// ignored.
#include "core/grammar/matcher.h"
#include "core/sampling/sampler.h"

namespace ember::grammar {

class GrammarStage final : public SamplerStage {
 public:
  // `matcher` must outlive the stage; the caller reads finished()/accepting() from it.
  explicit GrammarStage(Matcher& matcher) : matcher_(&matcher) {}

  void apply(CandidateSet& candidates) override;
  // Throws GrammarError when the drawn token is one the grammar forbids (a stage after this one
  // brought it back): the output would no longer be valid.
  void accept(int32_t token) override;
  void reset() override;

 private:
  Matcher* matcher_;
  bool drawn_pending_ = false;
};

}  // namespace ember::grammar
