#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "../expect_error.h"
#include "constrain/regex.h"
#include "match_helpers.h"

namespace qmpi {
namespace {

using testing_constrain::compile;

void expect_language(const std::string& pattern, const std::vector<std::string>& yes,
                     const std::vector<std::string>& no) {
  auto c = compile(ConstraintKind::Regex, pattern);
  for (const auto& s : yes)
    EXPECT_TRUE(c->matches(s)) << pattern << " should match \"" << s << "\"";
  for (const auto& s : no)
    EXPECT_FALSE(c->matches(s)) << pattern << " should not match \"" << s << "\"";
}

TEST(Regex, LiteralsClassesAndEscapes) {
  expect_language("abc", {"abc"}, {"", "ab", "abcd", "abd"});
  expect_language("[a-c]x", {"ax", "bx", "cx"}, {"dx", "x", "axx"});
  expect_language("[^a-c]", {"d", "Z", "\xC3\xA9"}, {"a", "b", "", "dd", "\xC3"});
  expect_language("\\d\\w\\s", {"1a ", "9_\t"}, {"a1 ", "11x"});
  expect_language("\\D\\W\\S", {"a!x"}, {"1!x", "aax", "a! "});
  expect_language("a\\.b\\-\\/\\\\", {"a.b-/\\"}, {"axb-/\\"});
  expect_language("\\x41\\u00e9\\n", {"A\xC3\xA9\n"}, {"A\xC3\xA9"});
  expect_language("[\\d.-]+", {"1.-2", "--"}, {"", "a"});
  expect_language(".", {"a", "\xE4\xBD\xA0"}, {"\n", "", "ab"});
}

TEST(Regex, QuantifiersGroupsAlternationAnchors) {
  expect_language("a*", {"", "a", "aaaa"}, {"b", "ab"});
  expect_language("a+b?", {"a", "aab"}, {"", "b", "abb"});
  expect_language("a{3}", {"aaa"}, {"aa", "aaaa"});
  expect_language("a{2,}", {"aa", "aaaaa"}, {"a"});
  expect_language("a{1,3}", {"a", "aa", "aaa"}, {"", "aaaa"});
  expect_language("a{0,2}?b", {"b", "ab", "aab"}, {"aaab"});
  expect_language("(ab|cd)+", {"ab", "cdab"}, {"", "ac", "abc"});
  expect_language("(?:x|y)(?<n>z)", {"xz", "yz"}, {"z", "xyz"});
  expect_language("^abc$", {"abc"}, {"xabc"});
  expect_language("cat|dog|", {"cat", "dog", ""}, {"catdog"});
  expect_language("a{,2}", {"a{,2}"}, {"aa"});  // not a quantifier: literal text
}

TEST(Regex, SyntaxErrorsNameLineAndColumn) {
  testing::expect_error([] { compile(ConstraintKind::Regex, "ab(c"); }, Err::RequestField,
                        {"column 5"});
  testing::expect_error([] { compile(ConstraintKind::Regex, "*a"); }, Err::RequestField,
                        {"column 1"});
  testing::expect_error([] { compile(ConstraintKind::Regex, "a(?=b)"); }, Err::RequestField,
                        {"lookaround"});
  testing::expect_error([] { compile(ConstraintKind::Regex, "(a)\\1"); }, Err::RequestField,
                        {"backreferences"});
  testing::expect_error([] { compile(ConstraintKind::Regex, "\\bx"); }, Err::RequestField,
                        {"word boundaries"});
  testing::expect_error([] { compile(ConstraintKind::Regex, "[z-a]"); }, Err::RequestField,
                        {"out of order"});
  testing::expect_error([] { compile(ConstraintKind::Regex, "a^b"); }, Err::RequestField,
                        {"anchor"});
  testing::expect_error([] { compile(ConstraintKind::Regex, "x[]"); }, Err::RequestField,
                        {"matches no finite text"});
  testing::expect_error([] { compile(ConstraintKind::Regex, "a{3,2}"); }, Err::RequestField,
                        {"n < m"});
}

// std::regex (ECMAScript) is the oracle: random strings over a small alphabet against patterns
// built from the supported features.
TEST(Regex, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<std::string> patterns = {
      "a(b|c)*d",  "(ab?)+c{0,2}", "[a-c]{2,3}d?",  "(a|ab)(c|bcd)", "a*b*c*d*",
      "((a|b)c)*", "[^b]+b",       "a?(bc|d){1,3}", "(a+|b+)+",      "[abd]*c[abd]*"};
  std::mt19937 rng(7);
  for (const auto& p : patterns) {
    const std::regex oracle(p, std::regex::ECMAScript);
    auto c = compile(ConstraintKind::Regex, p);
    for (int i = 0; i < 400; ++i) {
      std::string s;
      const int len = int(rng() % 7);
      for (int j = 0; j < len; ++j) s += char('a' + rng() % 4);
      EXPECT_EQ(c->matches(s), std::regex_match(s, oracle)) << p << " on \"" << s << "\"";
    }
  }
}

TEST(Regex, JsonStringModeEscapes) {
  // In a JSON string, a pattern's quote, backslash and newline are written as escapes.
  auto g = std::make_shared<Grammar>();
  const int32_t r = g->add_rule("r");
  g->define(r, regex_expr("a\"\\\\\\n", {.search = false, .json_string = true}));
  g->finish(r);
  CompiledConstraint c(g, testing_constrain::byte_vocab());
  EXPECT_TRUE(c.matches("a\\\"\\\\\\n"));
  EXPECT_FALSE(c.matches("a\"\\\n"));
}

}  // namespace
}  // namespace qmpi
