// read_bounded_line: lines up to the limit come back whole; a longer one is read through to its
// newline without being held (its text empty, its length counted), and the next line is intact.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "batch/line_reader.h"

namespace qmpi {
namespace {

TEST(BoundedLine, LongLinesAreCountedNotHeld) {
  const std::string big(1000, 'x');
  std::istringstream in("abc\n" + big + "\n  \t\n0123456789\nlast");
  BoundedLine l;
  ASSERT_TRUE(read_bounded_line(in, 10, l));
  EXPECT_EQ(l.text, "abc");
  EXPECT_FALSE(l.too_long);
  EXPECT_FALSE(l.blank);
  ASSERT_TRUE(read_bounded_line(in, 10, l));
  EXPECT_TRUE(l.too_long);
  EXPECT_EQ(l.bytes, 1000u);
  EXPECT_TRUE(l.text.empty());
  EXPECT_LE(l.text.capacity(), 64u);  // the 10 bytes read before the limit were let go
  ASSERT_TRUE(read_bounded_line(in, 10, l));
  EXPECT_TRUE(l.blank);
  ASSERT_TRUE(read_bounded_line(in, 10, l));  // exactly the limit: whole
  EXPECT_EQ(l.text, "0123456789");
  EXPECT_FALSE(l.too_long);
  ASSERT_TRUE(read_bounded_line(in, 10, l));  // no newline at the end
  EXPECT_EQ(l.text, "last");
  EXPECT_FALSE(read_bounded_line(in, 10, l));
}

TEST(BoundedLine, EmptyLinesAndEmptyInput) {
  std::istringstream in("\n\n");
  BoundedLine l;
  EXPECT_TRUE(read_bounded_line(in, 4, l));
  EXPECT_TRUE(l.blank);
  EXPECT_EQ(l.bytes, 0u);
  EXPECT_TRUE(read_bounded_line(in, 4, l));
  EXPECT_FALSE(read_bounded_line(in, 4, l));
  std::istringstream none("");
  EXPECT_FALSE(read_bounded_line(none, 4, l));
}

}  // namespace
}  // namespace qmpi
