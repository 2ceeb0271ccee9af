// GBNF text -> RuleSet. The format is llama.cpp's (grammars/README.md there): `name ::= alternatives`,
// a newline ends a rule except inside parentheses or after `::=` / `|`; items are "literals",
// [classes], [^negated classes], `.`, (groups) and rule names, each optionally followed by one of
// * + ? {m} {m,} {m,n}; `#` starts a comment. Repetitions and groups become synthesised rules here,
// so the matcher only ever sees characters and rule references.
#include <limits>
#include <unordered_map>

#include "core/grammar/grammar.h"
#include "core/grammar/utf8.h"

namespace ember::grammar {
namespace {

constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GrammarLimits& limits) : text_(text), limits_(limits) {}

  RuleSet parse() {
    if (text_.size() > limits_.max_text_bytes) {
      throw GrammarError("the grammar text is " + std::to_string(text_.size()) + " bytes, over the limit of " +
                         std::to_string(limits_.max_text_bytes));
    }
    while (true) {
      skip_space(true);
      if (at_end()) break;
      const size_t name_pos = pos_;
      const std::string name = parse_name();
      skip_space(false);
      if (text_.substr(pos_, 3) != "::=") fail("expected '::=' after the rule name '" + name + "'");
      pos_ += 3;
      skip_space(true);
      const uint32_t id = rule_id(name, name_pos);
      if (defined_[id]) fail_at(name_pos, "the rule '" + name + "' is defined twice");
      defined_[id] = 1;
      out_.rules[id] = parse_alternates(name, 0);
      skip_space(false);
      if (!at_end() && peek() != '\n' && peek() != '\r') fail("expected the end of the rule '" + name + "'");
    }
    for (uint32_t id = 0; id < out_.names.size(); ++id) {
      if (!defined_[id]) fail_at(first_use_[id], "the rule '" + out_.names[id] + "' is not defined");
    }
    const auto root = names_.find("root");
    if (root == names_.end()) throw GrammarError("the grammar has no 'root' rule");
    out_.root = root->second;
    return std::move(out_);
  }

 private:
  using Seq = std::vector<Element>;
  using Alts = std::vector<Seq>;

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  [[noreturn]] void fail(const std::string& message) const { fail_at(pos_, message); }
  [[noreturn]] void fail_at(size_t at, const std::string& message) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw GrammarError(message, line, column);
  }

  void skip_space(bool newline_ok) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if ((c == '\n' || c == '\r') && newline_ok) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  uint32_t new_rule(const std::string& name) {
    if (out_.names.size() >= limits_.max_rules) {
      fail("the grammar needs more than " + std::to_string(limits_.max_rules) +
           " rules (repetitions and groups count)");
    }
    out_.names.push_back(name);
    out_.rules.emplace_back();
    defined_.push_back(0);
    first_use_.push_back(pos_);
    return static_cast<uint32_t>(out_.names.size() - 1);
  }

  uint32_t rule_id(const std::string& name, size_t at) {
    const auto it = names_.find(name);
    if (it != names_.end()) return it->second;
    const uint32_t id = new_rule(name);
    first_use_[id] = at;
    names_.emplace(name, id);
    return id;
  }

  uint32_t synthesise(const std::string& base, Alts alts) {
    std::string name = base + "_" + std::to_string(out_.names.size());
    while (names_.count(name)) name += "_";
    const uint32_t id = new_rule(name);
    defined_[id] = 1;
    for (const Seq& s : alts) count(s.size() + 1);
    out_.rules[id] = std::move(alts);
    return id;
  }

  void count(size_t elements) {
    elements_ += elements;
    if (elements_ > limits_.max_elements) {
      fail("the grammar expands to more than " + std::to_string(limits_.max_elements) + " elements");
    }
  }

  uint32_t char_set(CharSet set) {
    // Literals repeat the same characters over and over: share their sets.
    const auto& r = set.ranges();
    if (r.size() == 1 && r[0].lo == r[0].hi) {
      const auto it = single_sets_.find(r[0].lo);
      if (it != single_sets_.end()) return it->second;
      single_sets_.emplace(r[0].lo, static_cast<uint32_t>(out_.char_sets.size()));
    }
    out_.char_sets.push_back(std::move(set));
    return static_cast<uint32_t>(out_.char_sets.size() - 1);
  }

  Alts parse_alternates(const std::string& rule, int depth) {
    Alts alts;
    alts.push_back(parse_sequence(rule, depth));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(rule, depth));
    }
    return alts;
  }

  Seq parse_sequence(const std::string& rule, int depth) {
    Seq seq;
    size_t item_start = seq.size();  // where the last item begins, for a following repetition
    bool have_item = false;
    const bool nested = depth > 0;
    while (!at_end()) {
      const char c = peek();
      if (c == '"') {
        ++pos_;
        item_start = seq.size();
        while (true) {
          if (at_end() || peek() == '\n') fail("unterminated string literal");
          if (peek() == '"') break;
          seq.push_back({ElementKind::Char, char_set(CharSet::single(parse_char()))});
        }
        ++pos_;
        have_item = true;
        count(seq.size() - item_start);
      } else if (c == '[') {
        ++pos_;
        item_start = seq.size();
        seq.push_back({ElementKind::Char, char_set(parse_class())});
        have_item = true;
        count(1);
      } else if (c == '.') {
        ++pos_;
        item_start = seq.size();
        seq.push_back({ElementKind::Char, char_set(CharSet::any())});
        have_item = true;
        count(1);
      } else if (c == '(') {
        if (depth + 1 > limits_.max_nesting) {
          fail("parentheses nested deeper than " + std::to_string(limits_.max_nesting));
        }
        ++pos_;
        skip_space(true);
        Alts inner = parse_alternates(rule, depth + 1);
        if (peek() != ')') fail("expected ')'");
        ++pos_;
        item_start = seq.size();
        seq.push_back({ElementKind::Rule, synthesise(rule, std::move(inner))});
        have_item = true;
        count(1);
      } else if (is_name_char(c)) {
        const size_t at = pos_;
        const std::string name = parse_name();
        item_start = seq.size();
        seq.push_back({ElementKind::Rule, rule_id(name, at)});
        have_item = true;
        count(1);
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_item) fail(std::string("'") + c + "' must follow an item");
        uint32_t min = 0, max = kUnbounded;
        ++pos_;
        if (c == '+') {
          min = 1;
        } else if (c == '?') {
          max = 1;
        } else if (c == '{') {
          parse_bounds(min, max);
        }
        Seq item(seq.begin() + static_cast<std::ptrdiff_t>(item_start), seq.end());
        seq.resize(item_start);
        repeat(rule, std::move(item), min, max, seq);
        have_item = false;  // `x**` is an error, as in llama.cpp
      } else {
        break;
      }
      skip_space(nested);
    }
    return seq;
  }

  void parse_bounds(uint32_t& min, uint32_t& max) {
    skip_space(false);
    min = parse_int();
    skip_space(false);
    if (peek() == '}') {
      max = min;
    } else if (peek() == ',') {
      ++pos_;
      skip_space(false);
      max = peek() == '}' ? kUnbounded : parse_int();
      skip_space(false);
      if (max != kUnbounded && max < min) fail("repetition maximum below its minimum");
    } else {
      fail("expected ',' or '}' in a repetition");
    }
    if (peek() != '}') fail("expected '}'");
    ++pos_;
  }

  uint32_t parse_int() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > limits_.max_repetition) fail_at(start, "repetition bound over " + std::to_string(limits_.max_repetition));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number");
    return static_cast<uint32_t>(v);
  }

  // x{min,max} as rules: min copies of x, then either `R ::= x R | ""` (unbounded) or a chain of
  // nested optionals `O_k ::= x O_(k-1) | ""` (so a bounded tail costs one rule per extra copy
  // and at most one stack frame, the references being in tail position).
  void repeat(const std::string& rule, Seq item, uint32_t min, uint32_t max, Seq& out) {
    Element unit = item.size() == 1 ? item[0] : Element{ElementKind::Rule, synthesise(rule, Alts{std::move(item)})};
    count(min);
    out.insert(out.end(), min, unit);
    if (max == kUnbounded) {
      const uint32_t star = synthesise(rule, Alts{});
      out_.rules[star] = Alts{Seq{unit, {ElementKind::Rule, star}}, Seq{}};
      count(4);
      out.push_back({ElementKind::Rule, star});
      return;
    }
    if (max == min) return;
    uint32_t tail = synthesise(rule, Alts{Seq{unit}, Seq{}});
    for (uint32_t k = min + 1; k < max; ++k) {
      tail = synthesise(rule, Alts{Seq{unit, {ElementKind::Rule, tail}}, Seq{}});
    }
    count(1);
    out.push_back({ElementKind::Rule, tail});
  }

  CharSet parse_class() {
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    CharSet set;
    bool any = false;
    while (true) {
      if (at_end() || peek() == '\n') fail("unterminated character class");
      if (peek() == ']') break;
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("character range out of order");
      }
      set.add(lo, hi);
      any = true;
    }
    if (!any) fail("empty character class");
    ++pos_;
    return negated ? set.complement() : set;
  }

  // One character of a literal or class: an escape or a UTF-8 encoded code point.
  uint32_t parse_char() {
    const size_t start = pos_;
    if (peek() != '\\') {
      const auto cp = decode_utf8(text_, pos_);
      if (!cp) fail_at(start, "invalid UTF-8 in the grammar text");
      return *cp;
    }
    ++pos_;
    if (at_end()) fail("unterminated escape");
    const char e = text_[pos_++];
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<unsigned char>(e);
      case 'x': return parse_hex(2, start);
      case 'u': return parse_hex(4, start);
      case 'U': return parse_hex(8, start);
      default: fail_at(start, std::string("unknown escape '\\") + e + "'");
    }
  }

  uint32_t parse_hex(int digits, size_t start) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else fail_at(start, "expected " + std::to_string(digits) + " hex digits in the escape");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > kMaxCodePoint) fail_at(start, "code point beyond U+10FFFF");
    return v;
  }

  std::string_view text_;
  GrammarLimits limits_;
  size_t pos_ = 0;
  size_t elements_ = 0;
  RuleSet out_;
  std::unordered_map<std::string, uint32_t> names_;
  std::vector<char> defined_;
  std::vector<size_t> first_use_;
  std::unordered_map<uint32_t, uint32_t> single_sets_;
};

}  // namespace

std::shared_ptr<const Grammar> Grammar::parse(std::string_view text, const GrammarLimits& limits) {
  return from_rules(GbnfParser(text, limits).parse());
}

}  // namespace ember::grammar
