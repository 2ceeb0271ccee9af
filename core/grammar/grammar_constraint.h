#pragma once
// A Matcher as the generator's LogitConstraint: the form the daemon uses, since it masks a copy of
// the logits (which logprobs then report) rather than filtering inside the sampler's chain as
// GrammarStage does.
#include <cstdint>
#include <memory>
#include <span>

#include "core/grammar/matcher.h"
#include "core/sampling/logit_constraint.h"

namespace ember::grammar {

class GrammarConstraint final : public LogitConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie)
      : matcher_(std::move(grammar), std::move(trie)) {}

  void mask(std::span<float> logits) override { matcher_.mask(logits); }
  // Throws GrammarError when the token is not allowed: the output would no longer be valid.
  void accept(int32_t token) override;

  const Matcher& matcher() const { return matcher_; }

 private:
  Matcher matcher_;
};

}  // namespace ember::grammar
