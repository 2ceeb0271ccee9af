#pragma once
// A restriction on which tokens may be sampled next (constrained decoding), seen by the generator
// only through this interface so core/model needs no grammar engine: the generator masks a copy
// of the logits before the sampler sees them, and reports the token drawn from them.
#include <cstdint>
#include <span>

namespace ember {

class LogitConstraint {
 public:
  virtual ~LogitConstraint() = default;
  // Sets the logit of every token that may not come next to -inf.
  virtual void mask(std::span<float> logits) = 0;
  // Advances on the token sampled from the masked logits. Throws when the token was not allowed.
  virtual void accept(int32_t token) = 0;
};

}  // namespace ember
