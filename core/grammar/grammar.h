#pragma once
// A compiled grammar: GBNF text (llama.cpp's `grammar` format) parsed into flat rules over
// code-point terminals. Immutable once built, so one instance is shared by every request and
// thread that uses it; the per-sequence state lives in Matcher.
//
// Layout: every alternative of every rule is a run of elements in one array, closed by an End
// element; a position in that array is all a parse stack frame needs (see automaton.h).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/grammar/char_set.h"
#include "core/grammar/grammar_error.h"

namespace ember::grammar {

enum class ElementKind : uint8_t {
  End,   // closes an alternative
  Char,  // one code point from char_set(value)
  Rule,  // a reference to rule `value`
};

struct Element {
  ElementKind kind;
  uint32_t value;
};

// Bounds on what a grammar text may cost, so a hostile grammar is refused with an error instead
// of exhausting memory or time. Repetitions are expanded into rules, so their bounds count too.
struct GrammarLimits {
  size_t max_text_bytes = size_t{1} << 20;
  size_t max_rules = 100000;              // written and synthesised (groups, repetitions)
  size_t max_elements = size_t{1} << 21;  // in all alternatives together
  int max_nesting = 64;                   // parentheses inside parentheses
  uint32_t max_repetition = 10000;        // the largest m or n in {m,n}
};

// What a builder hands to Grammar: rules as alternatives of element sequences (without End).
struct RuleSet {
  std::vector<std::string> names;
  std::vector<std::vector<std::vector<Element>>> rules;  // rule -> alternatives -> elements
  std::vector<CharSet> char_sets;
  uint32_t root = 0;
};

class Grammar {
 public:
  // Parses GBNF; throws GrammarError (line:column for syntax faults) on malformed text, an
  // undefined or twice-defined rule, a missing `root`, left recursion, or a limit exceeded.
  static std::shared_ptr<const Grammar> parse(std::string_view text, const GrammarLimits& limits = {});
  // From rules built in code; checked as parse() checks them (left recursion, undefined rules).
  static std::shared_ptr<const Grammar> from_rules(RuleSet rules);

  uint32_t root() const { return root_; }
  size_t rule_count() const { return alt_begin_.size() - 1; }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  // The start positions (in elements()) of the rule's alternatives.
  std::span<const uint32_t> alternatives(uint32_t rule) const {
    return {alt_starts_.data() + alt_begin_[rule], alt_starts_.data() + alt_begin_[rule + 1]};
  }
  const Element& element(uint32_t pos) const { return elements_[pos]; }
  size_t element_count() const { return elements_.size(); }
  const CharSet& char_set(uint32_t i) const { return char_sets_[i]; }

  // The grammar back as GBNF (synthesised rules included): for error messages and debugging.
  std::string to_gbnf() const;

 private:
  explicit Grammar(RuleSet rules);
  void check_left_recursion() const;

  std::vector<std::string> names_;
  std::vector<Element> elements_;
  std::vector<uint32_t> alt_starts_;
  std::vector<uint32_t> alt_begin_;  // rule r's alternatives: alt_starts_[alt_begin_[r] .. alt_begin_[r+1])
  std::vector<CharSet> char_sets_;
  uint32_t root_ = 0;
};

}  // namespace ember::grammar
