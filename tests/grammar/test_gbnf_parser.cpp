// GBNF parsing: accept/reject tables per construct, error positions, limits, left recursion.
#include <doctest/doctest.h>

#include <chrono>

#include "tests/grammar/grammar_test_util.h"

using ember::grammar::Grammar;
using ember::grammar::GrammarError;
using ember::grammar::GrammarLimits;
using ember::grammar::test::matches;

namespace {

struct Case {
  const char* grammar;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

void check_table(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const auto g = Grammar::parse(c.grammar);
    for (const auto& s : c.accept) {
      INFO("grammar: " << c.grammar << "  text: '" << s << "'");
      CHECK(matches(g, s));
    }
    for (const auto& s : c.reject) {
      INFO("grammar: " << c.grammar << "  text: '" << s << "'");
      CHECK_FALSE(matches(g, s));
    }
  }
}

std::string error_of(const std::string& gbnf, const GrammarLimits& limits = {}) {
  try {
    Grammar::parse(gbnf, limits);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("gbnf: literals, sequences, alternation, groups") {
  check_table({
      {R"(root ::= "abc")", {"abc"}, {"", "ab", "abcd", "abd"}},
      {R"(root ::= "a" "b" | "c")", {"ab", "c"}, {"a", "b", "ac", "abc"}},
      {R"(root ::= ("a" | "b") ("c" | "d"))", {"ac", "ad", "bc", "bd"}, {"a", "ab", "cd"}},
      {"root ::= x y\nx ::= \"1\"\ny ::= \"2\" | x", {"12", "11"}, {"1", "21"}},
      {R"(root ::= "")", {""}, {"a"}},
      {R"(root ::= | "a")", {"", "a"}, {"aa"}},
  });
}

TEST_CASE("gbnf: repetition operators") {
  check_table({
      {R"(root ::= "a"*)", {"", "a", "aaaa"}, {"b", "aab"}},
      {R"(root ::= "a"+)", {"a", "aaa"}, {""}},
      {R"(root ::= "a"? "b")", {"b", "ab"}, {"aab", "a"}},
      {R"(root ::= "ab"{2})", {"abab"}, {"ab", "ababab", "aab"}},
      {R"(root ::= "a"{2,})", {"aa", "aaaaaa"}, {"", "a"}},
      {R"(root ::= "a"{1,3})", {"a", "aa", "aaa"}, {"", "aaaa"}},
      {R"(root ::= "a"{0,2} "b")", {"b", "ab", "aab"}, {"aaab"}},
      {R"(root ::= "a"{ 0 , 0 } "b")", {"b"}, {"ab"}},
      {R"(root ::= ("x" "y"?)*)", {"", "x", "xy", "xxyx"}, {"y", "xyy"}},
      {R"(root ::= ("a"?)*)", {"", "a", "aaa"}, {"b"}},  // nullable loop: no left recursion
  });
}

TEST_CASE("gbnf: character classes, any char, escapes") {
  check_table({
      {R"(root ::= [a-c0-9]+)", {"a", "c9", "000"}, {"d", "", "A"}},
      {R"(root ::= [^a-c])", {"d", "\n", "\xC3\xA9"}, {"a", "b", "dd"}},
      {R"(root ::= [-a])", {"-", "a"}, {"b"}},
      {R"(root ::= [a-])", {"-", "a"}, {"b"}},
      {R"(root ::= .)", {"x", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"}, {"", "xy"}},
      {R"(root ::= "\x41\u00e9\U0001F600\n\t\\\"")", {"A\xC3\xA9\xF0\x9F\x98\x80\n\t\\\""}, {"A"}},
      {R"(root ::= [\]\[\-\\])", {"]", "[", "-", "\\"}, {"a"}},
      {R"(root ::= [\x00-\x1F])", {std::string(1, '\0'), "\x1F"}, {" "}},
  });
}

TEST_CASE("gbnf: UTF-8 in literals and classes") {
  check_table({
      {"root ::= \"h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C\"", {"h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C"}, {"hello"}},
      {"root ::= [\xC3\xA0-\xC3\xBF]+", {"\xC3\xA0\xC3\xA9", "\xC3\xBF"}, {"a", "\xC3\x9F", "\xC4\x80"}},
      {"root ::= [^\xE2\x82\xAC]", {"$", "\xE2\x82\xAD"}, {"\xE2\x82\xAC"}},
      // Malformed UTF-8 input never matches, even under `.`.
      {"root ::= .*", {"", "abc"}, {"\xFF", "\xC3", "\xC0\x80", "\xED\xA0\x80"}},
  });
}

TEST_CASE("gbnf: comments, newlines inside groups, forward references") {
  check_table({
      {"# leading comment\nroot ::= a # trailing\n\na ::= (\n  \"x\" |\n  \"y\"\n)\n", {"x", "y"}, {"xy"}},
      {"root ::= a |\n b\na ::= \"1\"\nb ::= \"2\"", {"1", "2"}, {"3"}},
      {"root ::= expr\nexpr ::= term (\"+\" term)*\nterm ::= [0-9]+ | \"(\" expr \")\"",
       {"1", "1+2", "(1+2)+3", "((4))"},
       {"", "1+", "(1", "1)"}},
  });
}

TEST_CASE("gbnf: recursive grammars (balanced brackets)") {
  check_table({
      {R"g(root ::= "" | "(" root ")" root)g", {"", "()", "(())()", "((()))"}, {"(", ")", "(()", "())("}},
  });
}

TEST_CASE("gbnf: errors carry line and column") {
  CHECK(error_of("root ::= \"abc") == "grammar:1:14: unterminated string literal");
  CHECK(error_of("root ::= a\n") == "grammar:1:10: the rule 'a' is not defined");
  CHECK(error_of("root ::= \"a\"\nroot ::= \"b\"") == "grammar:2:1: the rule 'root' is defined twice");
  CHECK(error_of("a ::= \"x\"") == "grammar: the grammar has no 'root' rule");
  CHECK(error_of("root := \"x\"") == "grammar:1:6: expected '::=' after the rule name 'root'");
  CHECK(error_of("root ::= [a-") == "grammar:1:13: unterminated character class");
  CHECK(error_of("root ::= [z-a]") == "grammar:1:14: character range out of order");
  CHECK(error_of("root ::= \"\\q\"") == "grammar:1:11: unknown escape '\\q'");
  CHECK(error_of("root ::= \"\\x4\"") == "grammar:1:11: expected 2 hex digits in the escape");
  CHECK(error_of("root ::= * \"a\"") == "grammar:1:10: '*' must follow an item");
  CHECK(error_of("root ::= \"a\"**") == "grammar:1:14: '*' must follow an item");
  CHECK(error_of("root ::= (\"a\"") == "grammar:1:14: expected ')'");
  CHECK(error_of("root ::= \"a\"{3,1}") == "grammar:1:17: repetition maximum below its minimum");
  CHECK(error_of("root ::= \"a\" )") == "grammar:1:14: expected the end of the rule 'root'");
  CHECK(error_of("root ::= []") == "grammar:1:11: empty character class");
  CHECK(error_of("") == "grammar: the grammar has no 'root' rule");
  CHECK(error_of("root ::= \"\xC3\"") == "grammar:1:11: invalid UTF-8 in the grammar text");
}

TEST_CASE("gbnf: left recursion is refused") {
  CHECK(error_of("root ::= root \"a\" | \"b\"").find("left recursion: rule 'root'") != std::string::npos);
  CHECK(error_of("root ::= a\na ::= b \"x\"\nb ::= c\nc ::= a | \"y\"").find("left recursion") != std::string::npos);
  // Through a rule that can be empty.
  CHECK(error_of("root ::= e root \"x\" | \"y\"\ne ::= \"\" | \"z\"").find("left recursion") != std::string::npos);
  // Right recursion is fine.
  CHECK(matches("root ::= \"a\" root | \"b\"", "aab"));
}

TEST_CASE("gbnf: limits refuse hostile grammars quickly") {
  const auto t0 = std::chrono::steady_clock::now();
  GrammarLimits small;
  small.max_rules = 1000;
  small.max_elements = 10000;
  CHECK(error_of("root ::= \"a\"{0,100000}").find("repetition bound over 10000") != std::string::npos);
  CHECK(error_of("root ::= (\"a\"{0,5000}){0,5000}", small).find("rules") != std::string::npos);
  CHECK(error_of("root ::= \"a\"{9000} \"a\"{9000}", small).find("elements") != std::string::npos);
  CHECK(error_of("root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')')).find("nested deeper than 64") !=
        std::string::npos);
  GrammarLimits tiny_text;
  tiny_text.max_text_bytes = 10;
  CHECK(error_of("root ::= \"abcdefgh\"", tiny_text).find("over the limit") != std::string::npos);
  // Nested repetitions cost the sum of their bounds, not the product.
  const auto g = Grammar::parse("root ::= ((\"a\"{0,1000}){0,1000}){0,1000}");
  CHECK(g->element_count() < 20000);
  // So ambiguous that matching may outgrow the closure bound: then an error, never a hang.
  std::string outcome;
  try {
    outcome = matches(g, std::string(300, 'a')) ? "match" : "no match";
  } catch (const GrammarError& e) {
    outcome = e.what();
  }
  CHECK((outcome == "match" || outcome.find("parse positions") != std::string::npos));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("gbnf: to_gbnf prints a grammar that parses to the same language") {
  const auto g = Grammar::parse(R"(root ::= "a" [b-d]* ("e" | [^f]) "\n")");
  const auto again = Grammar::parse(g->to_gbnf());
  for (const std::string s : {"ae\n", "abcdx\n", "af\n", "a\n"}) CHECK(matches(g, s) == matches(again, s));
}
