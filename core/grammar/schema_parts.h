#pragma once
// Pieces of the JSON-schema compiler that stand alone: string patterns (a regex subset) and
// integer ranges, each rendered as a GBNF expression. Internal to core/grammar.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/grammar/char_set.h"

namespace ember::grammar::detail {

// One character of JSON string content whose decoded value is in `set`: plain characters as a
// class, and '"', '\\', '/' and control characters in their escaped spellings.
std::string json_char_in(const CharSet& set);

// The content of a JSON string (between the quotes) whose decoded value matches the ECMAScript
// regex `pattern`, for the subset in docs/grammar.md. Throws SchemaError(pointer, "pattern") on
// anything outside it.
std::string pattern_to_gbnf(std::string_view pattern, const std::string& pointer);

// Decimal integers (no leading zeros, "-" for negatives) in [lo, hi], exactly.
std::string int_range_to_gbnf(int64_t lo, int64_t hi);

}  // namespace ember::grammar::detail
