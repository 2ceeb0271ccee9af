#pragma once
// Token lookups for doctest cases. Kept apart from metadata_builder.h, which the tokenizer fuzz
// target shares and which must therefore not depend on doctest.
#include <cstdint>

#include <doctest/doctest.h>

#include "core/tokenizer/tokenizer.h"

namespace ember::test {

// The id of a token the test's vocabulary must have (a failed REQUIRE otherwise).
inline int32_t id_of(const Tokenizer& t, const char* text) {
  auto id = t.find_token(text);
  REQUIRE_MESSAGE(id.has_value(), text);
  return *id;
}

}  // namespace ember::test
