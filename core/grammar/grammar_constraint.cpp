#include "core/grammar/grammar_constraint.h"

#include <string>

#include "core/grammar/grammar_error.h"

namespace ember::grammar {

void GrammarConstraint::accept(int32_t token) {
  if (!matcher_.accept(token)) {
    throw GrammarError("token " + std::to_string(token) + " was sampled but the grammar does not allow it");
  }
}

}  // namespace ember::grammar
