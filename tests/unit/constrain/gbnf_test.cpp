#include <gtest/gtest.h>

#include "../expect_error.h"
#include "match_helpers.h"

namespace qmpi {
namespace {

using testing_constrain::compile;

TEST(Gbnf, RulesRepetitionClassesAndComments) {
  auto c = compile(ConstraintKind::Gbnf, R"(
# a list of numbers
root   ::= "[" ws num ("," ws num)* "]"
num    ::= "-"? [1-9] [0-9]{0,2}
       | "0"
ws     ::= " "?
)");
  for (const char* s : {"[1]", "[ 12, -3,0]", "[999]"}) EXPECT_TRUE(c->matches(s)) << s;
  for (const char* s : {"[]", "[01]", "[1000]", "[1,]", "[1", "[  1]"})
    EXPECT_FALSE(c->matches(s)) << s;
}

TEST(Gbnf, RecursionAndEscapes) {
  auto c = compile(ConstraintKind::Gbnf,
                   "root ::= item\nitem ::= \"(\" item* \")\" | [^()\\n] | \"\\u00e9\"\n");
  for (const char* s : {"()", "(a(b)())", "x", "\xC3\xA9"}) EXPECT_TRUE(c->matches(s)) << s;
  for (const char* s : {"(", "(()", "ab", "\n"}) EXPECT_FALSE(c->matches(s)) << s;
}

TEST(Gbnf, ErrorsNameLineAndColumn) {
  testing::expect_error([] { compile(ConstraintKind::Gbnf, "root ::= \"a\"\nx ::= (\"b\"\n"); },
                        Err::RequestField, {"line 3", "')'"});
  testing::expect_error([] { compile(ConstraintKind::Gbnf, "root ::= foo\n"); }, Err::RequestField,
                        {"line 1, column 10", "\"foo\" is used but not defined"});
  testing::expect_error([] { compile(ConstraintKind::Gbnf, "start ::= \"a\"\n"); },
                        Err::RequestField, {"no rule named \"root\""});
  testing::expect_error([] { compile(ConstraintKind::Gbnf, "root ::= root \"a\" | \"b\"\n"); },
                        Err::RequestField, {"left-recursive"});
  testing::expect_error([] { compile(ConstraintKind::Gbnf, "root ::= \"a\" root\n"); },
                        Err::RequestField, {"can never end"});
  testing::expect_error([] { compile(ConstraintKind::Gbnf, "root ::= \"a\" @\n"); },
                        Err::RequestField, {"line 1, column 14"});
}

TEST(Choice, OneOfTheStrings) {
  auto c = compile(ConstraintKind::Choice, R"(["yes", "no", "n/a"])");
  for (const char* s : {"yes", "no", "n/a"}) EXPECT_TRUE(c->matches(s));
  for (const char* s : {"", "ye", "yesno", "NO"}) EXPECT_FALSE(c->matches(s));
}

}  // namespace
}  // namespace qmpi
