#include "text/byte_level.h"

#include <gtest/gtest.h>

#include "text/utf8.h"

namespace qmpi {
namespace {

TEST(ByteLevel, MapsWhitespaceBytesToTheShiftedRange) {
  EXPECT_EQ(byte_level::byte_to_char(' '), U'\u0120');   // Ġ
  EXPECT_EQ(byte_level::byte_to_char('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(byte_level::byte_to_char('\t'), U'\u0109');  // ĉ
  EXPECT_EQ(byte_level::byte_to_char(0x00), U'\u0100');
  EXPECT_EQ(byte_level::byte_to_char(0x7F), U'\u0121');
  EXPECT_EQ(byte_level::byte_to_char(0xAD), U'\u0143');  // the 68th and last shifted byte
  EXPECT_EQ(byte_level::encode(" \n\t"), "\u0120\u010A\u0109");
}

TEST(ByteLevel, PrintableLatin1StandsForItself) {
  EXPECT_EQ(byte_level::byte_to_char('A'), U'A');
  EXPECT_EQ(byte_level::byte_to_char('~'), U'~');
  EXPECT_EQ(byte_level::byte_to_char(0xA1), U'\u00A1');
  EXPECT_EQ(byte_level::byte_to_char(0xE9), U'\u00E9');
  // "é" is C3 A9 in UTF-8: two bytes, two alphabet characters.
  EXPECT_EQ(byte_level::encode("\xC3\xA9"), "\u00C3\u00A9");
}

TEST(ByteLevel, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string spelled = byte_level::encode(all);
  EXPECT_EQ(utf8::find_invalid(spelled), spelled.size());
  EXPECT_EQ(byte_level::decode(spelled), all);
  for (int b = 0; b < 256; ++b)
    EXPECT_EQ(byte_level::char_to_byte(byte_level::byte_to_char(static_cast<uint8_t>(b))), b);
  EXPECT_FALSE(byte_level::char_to_byte(U' ').has_value());  // a plain space is not in the alphabet
  EXPECT_FALSE(byte_level::char_to_byte(U'\u4F60').has_value());
}

TEST(ByteLevel, TokenOutsideTheAlphabetDecodesToItsOwnBytes) {
  EXPECT_EQ(byte_level::decode("<|im_end|>"), "<|im_end|>");  // all in the alphabet anyway
  EXPECT_EQ(byte_level::decode("<s p>"), "<s p>");            // plain space: kept as written
  EXPECT_EQ(byte_level::decode("\u4F60\u597D"), "\u4F60\u597D");
  EXPECT_EQ(byte_level::decode("\u0120hello"), " hello");
}

}  // namespace
}  // namespace qmpi
