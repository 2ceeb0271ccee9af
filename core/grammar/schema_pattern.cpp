// String `pattern` -> GBNF: a recursive-descent reader of the ECMAScript regex subset that has an
// exact grammar (no backreferences, lookaround or word boundaries), over the decoded string, then
// each character re-spelled as JSON string content (json_char_in).
#include <vector>

#include "core/grammar/gbnf_text.h"
#include "core/grammar/json_schema.h"
#include "core/grammar/schema_parts.h"

namespace ember::grammar::detail {

std::string json_char_in(const CharSet& set) {
  CharSet specials;
  specials.add(0, 0x1F);
  specials.add('"', '"');
  specials.add('\\', '\\');
  const CharSet plain = set.intersect(specials.complement());
  std::vector<std::string> parts;
  if (!plain.empty()) parts.push_back(gbnf_class(plain));
  if (set.contains('"')) parts.push_back(gbnf_literal("\\\""));
  if (set.contains('\\')) parts.push_back(gbnf_literal("\\\\"));
  if (set.contains('/')) parts.push_back(gbnf_literal("\\/"));
  static const char* kHex = "0123456789abcdef";
  for (uint32_t c = 0; c < 0x20; ++c) {
    if (!set.contains(c)) continue;
    switch (c) {
      case '\b': parts.push_back(gbnf_literal("\\b")); break;
      case '\f': parts.push_back(gbnf_literal("\\f")); break;
      case '\n': parts.push_back(gbnf_literal("\\n")); break;
      case '\r': parts.push_back(gbnf_literal("\\r")); break;
      case '\t': parts.push_back(gbnf_literal("\\t")); break;
      default: {
        // \u00XX, hex digits in either case.
        const char hi = kHex[c >> 4], lo = kHex[c & 15];
        auto digit = [](char d) {
          return d >= 'a' ? std::string("[") + d + static_cast<char>(d - 32) + "]" : std::string("\"") + d + "\"";
        };
        parts.push_back(gbnf_literal("\\u00") + " " + digit(hi) + " " + digit(lo));
      }
    }
  }
  if (parts.empty()) return "";
  if (parts.size() == 1) return parts[0];
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
  return out + ")";
}

namespace {

constexpr uint32_t kMaxPatternRepeat = 1000;

class PatternReader {
 public:
  PatternReader(std::string_view p, const std::string& pointer) : p_(p), pointer_(pointer) {}

  std::string compile() {
    bool start_anchor = false, end_anchor = false;
    if (!p_.empty() && p_[0] == '^') {
      start_anchor = true;
      pos_ = 1;
    }
    if (p_.size() > pos_ && p_.back() == '$') {
      size_t backslashes = 0;
      for (size_t i = p_.size() - 1; i > pos_ && p_[i - 1] == '\\'; --i) ++backslashes;
      if (backslashes % 2 == 0) {
        end_anchor = true;
        end_ = p_.size() - 1;
      }
    }
    size_t alternatives = 0;
    std::string body = alternation(0, alternatives);
    if (pos_ != end_) fail("unbalanced ')'");
    if (alternatives > 1 && (start_anchor || end_anchor)) {
      fail("an anchor with a top-level '|' binds to one alternative only: wrap the alternatives in a group");
    }
    std::string any = "(";
    any.append(json_char_in(CharSet::any())).append(")*");
    std::string out;
    if (!start_anchor) out.append(any).append(" ");
    out.append("(").append(body).append(")");
    if (!end_anchor) out.append(" ").append(any);
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw SchemaError(pointer_, "pattern", "unsupported pattern at offset " + std::to_string(pos_) + ": " + why);
  }
  bool more() const { return pos_ < end_; }
  char peek() const { return p_[pos_]; }

  std::string alternation(int depth, size_t& count) {
    if (depth > 32) fail("groups nested too deeply");
    std::string out = sequence(depth);
    count = 1;
    while (more() && peek() == '|') {
      ++pos_;
      out += " | " + sequence(depth);
      ++count;
    }
    return out;
  }

  std::string sequence(int depth) {
    std::string out;
    while (more() && peek() != '|' && peek() != ')') {
      std::string atom_text = atom(depth);
      atom_text = quantified("(" + atom_text + ")");
      out += (out.empty() ? "" : " ") + atom_text;
    }
    return out.empty() ? "\"\"" : out;
  }

  std::string quantified(const std::string& atom_text) {
    if (!more()) return atom_text;
    std::string out = atom_text;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      out += c;
    } else if (c == '{') {
      ++pos_;
      const uint32_t min = number();
      uint32_t max = min;
      bool open = false;
      if (more() && peek() == ',') {
        ++pos_;
        if (more() && peek() == '}') {
          open = true;
        } else {
          max = number();
        }
      }
      if (!more() || peek() != '}') fail("expected '}'");
      ++pos_;
      if (!open && max < min) fail("repetition maximum below its minimum");
      out.append("{").append(std::to_string(min));
      if (open) {
        out.append(",");
      } else if (max != min) {
        out.append(",").append(std::to_string(max));
      }
      out.append("}");
    } else {
      return out;
    }
    if (more() && peek() == '?') ++pos_;  // lazy: the same language
    if (more() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')) fail("a quantifier after a quantifier");
    return out;
  }

  uint32_t number() {
    uint32_t v = 0;
    const size_t start = pos_;
    while (more() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint32_t>(peek() - '0');
      if (v > kMaxPatternRepeat) fail("repetition bound over " + std::to_string(kMaxPatternRepeat));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number");
    return v;
  }

  std::string atom(int depth) {
    const char c = peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (more() && peek() == '?') {
          if (pos_ + 1 < end_ && p_[pos_ + 1] == ':') {
            pos_ += 2;
          } else {
            fail("lookaround and named groups");
          }
        }
        size_t n;
        std::string inner = alternation(depth + 1, n);
        if (!more() || peek() != ')') fail("expected ')'");
        ++pos_;
        return inner;
      }
      case '[': {
        const CharSet set = char_class();
        if (set.empty()) fail("a class that matches nothing");
        return json_char_in(set);
      }
      case '.': {
        ++pos_;
        CharSet line_ends;
        line_ends.add('\n', '\n');
        line_ends.add('\r', '\r');
        line_ends.add(0x2028, 0x2029);
        return json_char_in(line_ends.complement());
      }
      case '\\': {
        ++pos_;
        return json_char_in(escape(false));
      }
      case '*': case '+': case '?': case '{': fail("a quantifier with nothing to repeat");
      case '^': case '$': fail("an anchor inside the pattern");
      case '}': case ']': fail("an unescaped '" + std::string(1, c) + "'");
      default: {
        const auto cp = decode_utf8(p_.substr(0, end_), pos_);
        if (!cp) fail("invalid UTF-8");
        return json_char_in(CharSet::single(*cp));
      }
    }
  }

  CharSet char_class() {
    ++pos_;  // '['
    bool negated = false;
    if (more() && peek() == '^') {
      negated = true;
      ++pos_;
    }
    CharSet set;
    bool any = false;
    while (true) {
      if (!more()) fail("unterminated character class");
      if (peek() == ']') break;
      CharSet lo_set = class_atom();
      if (more() && peek() == '-' && pos_ + 1 < end_ && p_[pos_ + 1] != ']') {
        ++pos_;
        CharSet hi_set = class_atom();
        const auto& a = lo_set.ranges();
        const auto& b = hi_set.ranges();
        if (a.size() != 1 || b.size() != 1 || a[0].lo != a[0].hi || b[0].lo != b[0].hi) fail("a range of classes");
        if (b[0].lo < a[0].lo) fail("character range out of order");
        set.add(a[0].lo, b[0].lo);
      } else {
        for (const CodeRange& r : lo_set.ranges()) set.add(r.lo, r.hi);
      }
      any = true;
    }
    ++pos_;
    if (!any) fail("an empty class");
    return negated ? set.complement() : set;
  }

  CharSet class_atom() {
    if (peek() == '\\') {
      ++pos_;
      return escape(true);
    }
    const auto cp = decode_utf8(p_.substr(0, end_), pos_);
    if (!cp) fail("invalid UTF-8");
    return CharSet::single(*cp);
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (!more()) fail("a short hex escape");
      const char c = peek();
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else fail("a bad hex escape");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  CharSet escape(bool in_class) {
    if (!more()) fail("a trailing backslash");
    const char e = peek();
    ++pos_;
    CharSet s;
    switch (e) {
      case 'd': return CharSet::range('0', '9');
      case 'D': return CharSet::range('0', '9').complement();
      case 'w': case 'W':
        s.add('0', '9');
        s.add('A', 'Z');
        s.add('a', 'z');
        s.add('_', '_');
        return e == 'w' ? s : s.complement();
      case 's': case 'S':
        for (uint32_t c : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu,
                           0x3000u, 0xFEFFu}) {
          s.add(c, c);
        }
        s.add(0x2000, 0x200A);
        return e == 's' ? s : s.complement();
      case 'n': return CharSet::single('\n');
      case 'r': return CharSet::single('\r');
      case 't': return CharSet::single('\t');
      case 'f': return CharSet::single('\f');
      case 'v': return CharSet::single('\v');
      case '0': return CharSet::single(0);
      case 'x': return CharSet::single(hex(2));
      case 'u':
        if (more() && peek() == '{') fail("\\u{...} escapes");
        return CharSet::single(hex(4));
      case 'b':
        if (in_class) return CharSet::single('\b');
        fail("word boundaries (\\b)");
      default:
        if (static_cast<unsigned char>(e) >= 0x80) fail("an escaped non-ASCII character");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9')) {
          fail(std::string("the escape \\") + e);
        }
        return CharSet::single(static_cast<unsigned char>(e));
    }
  }

  std::string_view p_;
  const std::string& pointer_;
  size_t pos_ = 0;
  size_t end_ = p_.size();
};

}  // namespace

std::string pattern_to_gbnf(std::string_view pattern, const std::string& pointer) {
  return PatternReader(pattern, pointer).compile();
}

}  // namespace ember::grammar::detail
