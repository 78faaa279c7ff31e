#include "text/utf8.h"

#include <gtest/gtest.h>

namespace qmpi {
namespace {

const std::string R = "\xEF\xBF\xBD";  // U+FFFD

TEST(Utf8, ValidTextIsUnchanged) {
  const std::string s = "a\u00E9\u4F60\U0001F600";
  EXPECT_EQ(utf8::find_invalid(s), s.size());
  EXPECT_EQ(utf8::make_valid(s), s);
  size_t i = 0;
  EXPECT_EQ(utf8::decode(s, i), U'a');
  EXPECT_EQ(utf8::decode(s, i), U'\u00E9');
  EXPECT_EQ(utf8::decode(s, i), U'\u4F60');
  EXPECT_EQ(utf8::decode(s, i), U'\U0001F600');
  EXPECT_EQ(i, s.size());
}

// One U+FFFD per maximal subpart, the rule Rust's from_utf8_lossy and Python's
// errors="replace" follow.
TEST(Utf8, ReplacesMaximalSubparts) {
  EXPECT_EQ(utf8::make_valid("\xE4\xBD"), R);  // truncated 3-byte character
  EXPECT_EQ(utf8::make_valid("\xE4\xBDx"), R + "x");
  EXPECT_EQ(utf8::make_valid("\x80"), R);  // lone continuation byte
  EXPECT_EQ(utf8::make_valid("\x80\x80"), R + R);
  EXPECT_EQ(utf8::make_valid("\xC0\xAF"), R + R);                  // overlong lead byte
  EXPECT_EQ(utf8::make_valid("\xE0\x80\xAF"), R + R + R);          // overlong 3-byte form
  EXPECT_EQ(utf8::make_valid("\xED\xA0\x80"), R + R + R);          // a surrogate
  EXPECT_EQ(utf8::make_valid("\xF0\x9F\x98"), R);                  // truncated emoji
  EXPECT_EQ(utf8::make_valid("\xF4\x90\x80\x80"), R + R + R + R);  // above U+10FFFF
  EXPECT_EQ(utf8::make_valid("\xF5"), R);
  EXPECT_EQ(utf8::make_valid("a\xFF"
                             "b\xF0\x9F\x98\x80"),
            "a" + R + "b\U0001F600");
  EXPECT_EQ(utf8::find_invalid("ab\xE4\xBD"), 2u);
}

TEST(Utf8, TellsIncompleteFromInvalid) {
  auto u = utf8::next_unit("\xF0\x9F\x98");
  EXPECT_EQ(u.kind, utf8::Unit::Incomplete);
  u = utf8::next_unit("\xF0\x9F\x98\x80");
  EXPECT_EQ(u.kind, utf8::Unit::Char);
  EXPECT_EQ(u.len, 4u);
  u = utf8::next_unit("\xF0\x9Fx");
  EXPECT_EQ(u.kind, utf8::Unit::Invalid);
  EXPECT_EQ(u.len, 2u);
  u = utf8::next_unit("\xE0\x80");  // E0 80 can never start a character
  EXPECT_EQ(u.kind, utf8::Unit::Invalid);
  EXPECT_EQ(u.len, 1u);
}

TEST(Utf8, AppendEncodesEveryLength) {
  std::string s;
  for (char32_t cp :
       {U'\u007F', U'\u0080', U'\u07FF', U'\u0800', U'\uFFFF', U'\U00010000', U'\U0010FFFF'})
    utf8::append(s, cp);
  EXPECT_EQ(s, "\x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF");
}

}  // namespace
}  // namespace qmpi
